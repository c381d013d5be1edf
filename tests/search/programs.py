"""Programs the numeric strategy search is tested and benchmarked on (tests/search/test_numeric*.py,
bench/bench_strategy.py)."""

# Chapter 3, question 7: In[B, D] · W_in[D, F] · W_out[F, D] as two statements with the weights declared,
# on a TPU v5e 2x2 with 300 MB free per chip, forward only
MLP = "params W_in, W_out\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"
Q7 = {"mesh": "X=2,Y=2", "sizes": "B=128,D=8192,F=32768", "hw": "tpu-v5e", "memory": "300MB", "mode": "infer"}

# One transformer layer: attention (the Q, K, V and output projections; N = heads x head dim, the attention
# core's output A an input, as the notation does not show softmax) and the MLP (its activation's output M an
# input); tokens B, T: B the data dim, T the sequence dim
TRANSFORMER = """params W_q, W_k, W_v, W_o, W_in, W_out
tokens B, T
In[B, T, D] * W_q[D, N] -> Q[B, T, N]
In[B, T, D] * W_k[D, N] -> Kp[B, T, N]
In[B, T, D] * W_v[D, N] -> Vp[B, T, N]
A[B, T, N] * W_o[N, D] -> Att[B, T, D]
Hn[B, T, D] * W_in[D, F] -> U[B, T, F]
M[B, T, F] * W_out[F, D] -> Out[B, T, D]"""
LAYER = {"mesh": "X=2,Y=2,Z=2", "sizes": "B=8,T=2048,D=8192,N=8192,F=32768", "hw": "tpu-v5e", "mode": "infer"}

# The same layer with its functions and its attention core written (issue 26 items 3 and 5): the norms, the
# causal attention over H heads of E, the residual adds and the gated MLP. The keys' and values' positions S
# are the projection's tokens T renamed (``rename_{T,S}``: the same blocks), and S is not a tokens dim: a
# sequence sharded over an axis gathers K and V over it before the core, which is what sequence parallelism
# pays (a ring would pass them instead)
TRANSFORMER_FN = """params W_q, W_k, W_v, W_o, W_gate, W_in, W_out, g_attn, g_mlp
tokens B, T
rmsnorm_D(In[B, T, D]) -> Hr[B, T, D]
Hr[B, T, D] .* g_attn[D] -> Ha[B, T, D]
Ha[B, T, D] * W_q[D, H, E] -> Q[B, T, H, E]
Ha[B, T, D] * W_k[D, H, E] -> Kp[B, T, H, E]
Ha[B, T, D] * W_v[D, H, E] -> Vp[B, T, H, E]
rename_{T,S}(Kp[B, T, H, E]) -> K[B, S, H, E]
rename_{T,S}(Vp[B, T, H, E]) -> V[B, S, H, E]
Q[B, T, H, E] * K[B, S, H, E] -> Sc[B, H, T, S]
softmax_{S,causal}(Sc[B, H, T, S]) -> P[B, H, T, S]
P[B, H, T, S] * V[B, S, H, E] -> A[B, T, H, E]
A[B, T, H, E] * W_o[H, E, D] -> Att[B, T, D]
In[B, T, D] + Att[B, T, D] -> Rs[B, T, D]
rmsnorm_D(Rs[B, T, D]) -> Hm[B, T, D]
Hm[B, T, D] .* g_mlp[D] -> Hn[B, T, D]
Hn[B, T, D] * W_gate[D, F] -> Gt[B, T, F]
Hn[B, T, D] * W_in[D, F] -> U[B, T, F]
silu(Gt[B, T, F]) -> Sg[B, T, F]
Sg[B, T, F] .* U[B, T, F] -> M[B, T, F]
M[B, T, F] * W_out[F, D] -> Out[B, T, D]
Rs[B, T, D] + Out[B, T, D] -> Y[B, T, D]"""
LAYER_TRAIN = {
    "mesh": "X=2,Y=2,Z=2",
    "sizes": "B=8,T=2048,S=2048,D=8192,H=64,E=128,F=32768",
    "hw": "tpu-v5e",
    "mode": "train",
}

# The layer with a head, as the presets write a whole model: the layer repeated L times, then the final norm
# of its last output and the unembedding, once (``embeddings`` and ``layers`` declared)
HEADED_FN = (
    TRANSFORMER_FN.replace("tokens B, T", "embeddings W_un, g_final\ntokens B, T\nlayers L")
    + """
rmsnorm_D(Xl[B, T, D]) -> Xr[B, T, D]
Xr[B, T, D] .* g_final[D] -> Xf[B, T, D]
Xf[B, T, D] * W_un[D, V] -> Lg[B, T, V]"""
)
