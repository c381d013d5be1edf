"""A small model with an embedding before its repeated layer and an unembedding after it, on 4 pipeline
stages: the pipeline tests derive each stage's figures from these dims."""

HEADED = """params W1, W2; embeddings W_emb, W_un; layers L
W_emb[V, D]
In[B_X, D] * W1[D, F] -> H[B_X, F]
H[B_X, F] * W2[F, D] -> Out[B_X, D]
Xl[B_X, D] * W_un[D, V] -> Lg[B_X, V]
"""  # the embedding table declared before the layer, the unembedding after it
B, D, F, V, L = 64, 256, 1024, 4096, 8
MESH, SIZES = "P=4,X=2", f"B={B},D={D},F={F},V={V},L={L}"
P, M = 4, 4  # stages and microbatches: 2 layers a stage
