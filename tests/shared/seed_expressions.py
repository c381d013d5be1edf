r"""Every sharding expression written in the seed documents (/work/shared/seeds), quoted exactly as it
appears there (LaTeX, dollars and all), with the AST it means (``SEED``); and the bracketed text in the seeds
that is not the notation, each with the reason (``NOT_NOTATION``)."""

from __future__ import annotations

from shardalg.notation.syntax import Arrow, Collective, Dim, DType, Op, Product, Tensor


def T(name: str | None, *dims: str, u: str = "", i: str = "", dtype: DType | None = None) -> Tensor:
    """``T("A", "I.X", "J")`` is ``A[I_X, J]``; ``"I.XY"`` shards I over X then Y; ``"1024"`` is a size."""
    out = []
    for spec in dims:
        label, _, axes = spec.partition(".")
        out.append(Dim(None, tuple(axes), size=int(label)) if label.isdigit() else Dim(label, tuple(axes)))
    return Tensor(name, tuple(out), tuple(u), tuple(i), dtype)


def AG(axes: str, arg, dim=None) -> Collective:
    return Collective(Op.ALL_GATHER, tuple(axes), arg, dim)


def RS(axes: str, arg, dim=None) -> Collective:
    return Collective(Op.REDUCE_SCATTER, tuple(axes), arg, dim)


def AR(axes: str, arg) -> Collective:
    return Collective(Op.ALL_REDUCE, tuple(axes), arg)


def A2A(axes: str, arg, dim=None) -> Collective:
    return Collective(Op.ALL_TO_ALL, tuple(axes), arg, dim)


def P(left, right, contract: str | None = None, local: bool = False) -> Product:
    return Product(left, right, tuple(contract) if contract else None, local)


A_IX_J, B_J_KY = T("A", "I.X", "J"), T("B", "J", "K.Y")

# (seed file:line, the text as written, the statements it means)
SEED: list[tuple[str, str, tuple]] = [
    # ---- 000, the notation
    ("000:17", r"A[I, J]", (T("A", "I", "J"),)),
    ("000:17", r"A[I_X, J_Y]", (T("A", "I.X", "J.Y"),)),
    ("000:28", r"$A[I_X, J_Y]$", (T("A", "I.X", "J.Y"),)),
    ("000:32", r"fp32[1024, 4096]", (T(None, "1024", "4096", dtype=DType.FP32),)),
    ("000:32", r"$A[I_{XY}, J]$", (T("A", "I.XY", "J"),)),
    ("000:36", r"fp32[64, 4096]", (T(None, "64", "4096", dtype=DType.FP32),)),
    ("000:42", r"$A[I, J]$", (T("A", "I", "J"),)),
    ("000:43", r"$A[I_X, J]$", (A_IX_J,)),
    ("000:47", r"$A[I_X, J_X]$", (T("A", "I.X", "J.X"),)),  # parses; legality rejects it
    ("000:49", r"int8[128, 2048]", (T(None, "128", "2048", dtype=DType.INT8),)),
    ("000:53", r"int8[8, 2048]", (T(None, "8", "2048", dtype=DType.INT8),)),
    ("000:85", r"[2, 1024]", (T(None, "2", "1024"),)),
    ("000:85", r"[2048, 4096]", (T(None, "2048", "4096"),)),
    # ---- 000, the four cases
    (
        "000:100",
        r"$A[I_X, J] \cdot B[J, K_Y] \to C[I_X, K_Y]$",
        (Arrow(P(A_IX_J, B_J_KY), T("C", "I.X", "K.Y")),),
    ),
    ("000:100", r"$A[I_X, J] \cdot B[J, K_Y] \to C[I, K]$", (Arrow(P(A_IX_J, B_J_KY), T("C", "I", "K")),)),
    (
        "000:137",
        r"$$\mathbf{A}[I_X, J] \cdot \mathbf{B}[J, K_Y] \rightarrow \mathbf{C}[I_X, K_Y]$$",
        (Arrow(P(A_IX_J, B_J_KY), T("C", "I.X", "K.Y")),),
    ),
    (
        "000:141",
        r"$$\begin{aligned} \mathbf{A}[I, J] \cdot \mathbf{B}[J, K] &\rightarrow \mathbf{C}[I, K] \\ \mathbf{A}[I_X, J] \cdot \mathbf{B}[J, K] &\rightarrow \mathbf{C}[I_X, K]\\ \mathbf{A}[I, J] \cdot \mathbf{B}[J, K_Y] &\rightarrow \mathbf{C}[I, K_Y]\\ \mathbf{A}[I_X, J] \cdot \mathbf{B}[J, K_Y] &\rightarrow \mathbf{C}[I_X, K_Y] \end{aligned}$$",
        (
            Arrow(P(T("A", "I", "J"), T("B", "J", "K")), T("C", "I", "K")),
            Arrow(P(A_IX_J, T("B", "J", "K")), T("C", "I.X", "K")),
            Arrow(P(T("A", "I", "J"), B_J_KY), T("C", "I", "K.Y")),
            Arrow(P(A_IX_J, B_J_KY), T("C", "I.X", "K.Y")),
        ),
    ),
    (
        "000:149",
        r"$$\mathbf{A}[I, J_X] \cdot \mathbf{B}[J, K] \rightarrow \mathbf{C}[I, K]$$",
        (Arrow(P(T("A", "I", "J.X"), T("B", "J", "K")), T("C", "I", "K")),),
    ),
    (
        "000:153",
        r"$$\textbf{AllGather}_X[I, J_X] \rightarrow \mathbf{A}[I, J]$$ $$\mathbf{A}[I, J] \cdot \mathbf{B}[J, K] \rightarrow \mathbf{C}[I, K]$$",
        (
            Arrow(AG("X", T(None, "I", "J.X")), T("A", "I", "J")),
            Arrow(P(T("A", "I", "J"), T("B", "J", "K")), T("C", "I", "K")),
        ),
    ),
    (
        "000:165",
        r"$$\textbf{AllGather}_{XY}(A[I_{XY}, J]) \rightarrow A[I, J]$$",
        (Arrow(AG("XY", T("A", "I.XY", "J")), T("A", "I", "J")),),
    ),
    ("000:167", r"$A[I_{XY}, J] \rightarrow A[I_Y, J]$", (Arrow(T("A", "I.XY", "J"), T("A", "I.Y", "J")),)),
    (
        "000:169",
        r"$$A[I_X, J] \cdot B[J, K] \rightarrow C[I, K]$$",
        (Arrow(P(A_IX_J, T("B", "J", "K")), T("C", "I", "K")),),
    ),
    ("000:205", r"AllGather_XY([B, D_XY])", (AG("XY", T(None, "B", "D.XY")),)),
    ("000:213", r"AllGather_Y([E_Y, F]) → [E, F]", (Arrow(AG("Y", T(None, "E.Y", "F")), T(None, "E", "F")),)),
    ("000:220", r"$A[E_Y, F]$", (T("A", "E.Y", "F"),)),
    ("000:220", r"bf16[512, 8192]", (T(None, "512", "8192", dtype=DType.BF16),)),
    (
        "000:232",
        r"$$\textbf{A}[I, J_X] \cdot \textbf{B}[J_X, K] \rightarrow C[I, K]$$",
        (Arrow(P(T("A", "I", "J.X"), T("B", "J.X", "K")), T("C", "I", "K")),),
    ),
    (
        "000:236",
        r"$$\textbf{A}[I, J_X] \cdot_\text{LOCAL} \textbf{B}[J_X, K] \rightarrow C[I, K] \{\ U_X \}$$",
        (Arrow(P(T("A", "I", "J.X"), T("B", "J.X", "K"), local=True), T("C", "I", "K", u="X")),),
    ),
    (
        "000:248",
        r"$$\begin{aligned} A[I, J_X] \cdot_\text{LOCAL} B[J_X, K] &\rightarrow C[I, K] \{ U_X \} \\ \textbf{AllReduce}_X C[I, K] \{ U_X \} &\rightarrow C[I, K] \end{aligned}$$",
        (
            Arrow(P(T("A", "I", "J.X"), T("B", "J.X", "K"), local=True), T("C", "I", "K", u="X")),
            Arrow(AR("X", T("C", "I", "K", u="X")), T("C", "I", "K")),
        ),
    ),
    (
        "000:252",
        r"$$\textbf{AllReduce}_Y A[I_X, J] \{U_Y\} \rightarrow A[I_X, J]$$",
        (Arrow(AR("Y", T("A", "I.X", "J", u="Y")), A_IX_J),),
    ),
    (
        "000:258",
        r"$$\begin{aligned} \textbf{ReduceScatter}_{Y,J} : A[I_X,J] \{U_Y\} &\rightarrow A[I_X, J_Y] \\ \textbf{AllGather}_Y : A[I_X, J_Y] &\rightarrow A[I_X, J] \end{aligned}$$",
        (
            Arrow(RS("Y", T("A", "I.X", "J", u="Y"), "J"), T("A", "I.X", "J.Y")),
            Arrow(AG("Y", T("A", "I.X", "J.Y")), A_IX_J),
        ),
    ),
    ("000:260", r"$X[F]\{U_Y\} \to X[F_Y]$", (Arrow(T("X", "F", u="Y"), T("X", "F.Y")),)),
    (
        "000:272",
        r"$$A[I_X, J] \cdot B[J, K_X] \rightarrow C[I_X, K_X]$$",
        (Arrow(P(A_IX_J, T("B", "J", "K.X")), T("C", "I.X", "K.X")),),
    ),
    (
        "000:278",
        r"$$\begin{aligned} \textbf{AllGather}_X A[I_X, J] &\rightarrow A[I, J] \\ A[I, J] \cdot B[J, K_X] &\rightarrow C[I, K_X] \end{aligned}$$",
        (
            Arrow(AG("X", A_IX_J), T("A", "I", "J")),
            Arrow(P(T("A", "I", "J"), T("B", "J", "K.X")), T("C", "I", "K.X")),
        ),
    ),
    (
        "000:282",
        r"$$\begin{aligned} \textbf{AllGather}_X B[J, K_X] &\rightarrow B[J, K] \\ A[I_X, J] \cdot B[J, K] &\rightarrow C[I_X, K] \end{aligned}$$",
        (
            Arrow(AG("X", T("B", "J", "K.X")), T("B", "J", "K")),
            Arrow(P(A_IX_J, T("B", "J", "K")), T("C", "I.X", "K")),
        ),
    ),
    (
        "000:300",
        r"$$\textbf{AllToAll}_{X, J} A[I_X, J] \rightarrow A[I, J_X]$$",
        (Arrow(A2A("X", A_IX_J, "J"), T("A", "I", "J.X")),),
    ),
    (
        "000:318",
        r"$$\textbf{AllGather}_X A[I_X] \rightarrow A[I]$$",
        (Arrow(AG("X", T("A", "I.X")), T("A", "I")),),
    ),
    (
        "000:322",
        r"$$\textbf{ReduceScatter}_X A'[I] \{ U_X \} \rightarrow A'[I_X]$$",
        (Arrow(RS("X", T("A'", "I", u="X")), T("A'", "I.X")),),
    ),
    (
        "000:324",
        r"$\text{ReduceScatter}_X(A[I] \{U_X\}) \to A[I_X]$",
        (Arrow(RS("X", T("A", "I", u="X")), T("A", "I.X")),),
    ),
    (
        "000:324",
        r"$\text{AllGather}_{X}(A'[I_X]) \to A'[I]$",
        (Arrow(AG("X", T("A'", "I.X")), T("A'", "I")),),
    ),
    (
        "000:340",
        r"$$A[I, J_X] \cdot B[J_X, K] \rightarrow C[I, K_X]$$",
        (Arrow(P(T("A", "I", "J.X"), T("B", "J.X", "K")), T("C", "I", "K.X")),),
    ),
    (
        "000:344",
        r"$$\begin{aligned} A[I, J_X] \cdot_{LOCAL} B[J_X, K] &\rightarrow C[I, K] \{ U_X \} \\ \textbf{ReduceScatter}_{X,K} C[I, K] \{ U_X \} &\rightarrow C[I, K_X] \end{aligned}$$",
        (
            Arrow(P(T("A", "I", "J.X"), T("B", "J.X", "K"), local=True), T("C", "I", "K", u="X")),
            Arrow(RS("X", T("C", "I", "K", u="X"), "K"), T("C", "I", "K.X")),
        ),
    ),
    ("000:359", r"A[I_XY, J]", (T("A", "I.XY", "J"),)),
    # ---- 000, the collectives summary and its table (lines 366-369 and 377-380 write the same four)
    ("000:366", r"$[A_X, B] \to [A, B]$", (Arrow(T(None, "A.X", "B"), T(None, "A", "B")),)),
    ("000:367", r"$[A, B] \{U_X\} \to [A_X, B]$", (Arrow(T(None, "A", "B", u="X"), T(None, "A.X", "B")),)),
    ("000:368", r"$[A, B_X] \to [A_X, B]$", (Arrow(T(None, "A", "B.X"), T(None, "A.X", "B")),)),
    ("000:369", r"$[A_X, B]\{U_Y\} \to [A_X, B]$", (Arrow(T(None, "A.X", "B", u="Y"), T(None, "A.X", "B")),)),
    # ---- 000, questions
    ("000:402", r"$\text{AllGather}_X([B_X, D_Y])$", (AG("X", T(None, "B.X", "D.Y")),)),
    ("000:402", r"$\text{AllGather}_{XY}([B_X, D_Y])$", (AG("XY", T(None, "B.X", "D.Y")),)),
    ("000:402", r"$\text{AllReduce}_Z([B_X, D_Y] \{U_Z \})$", (AR("Z", T(None, "B.X", "D.Y", u="Z")),)),
    ("000:412", r"$[B_X, D_Y] \to [B_{XZ}, D_Y]$", (Arrow(T(None, "B.X", "D.Y"), T(None, "B.XZ", "D.Y")),)),
    ("000:414", r"$\text{AllGather}_X([B_X])$", (AG("X", T(None, "B.X")),)),
    (
        "000:420",
        r"$X[B, D] \cdot_D Y[D_X, F] \to Z[B, F]$",
        (Arrow(P(T("X", "B", "D"), T("Y", "D.X", "F"), "D"), T("Z", "B", "F")),),
    ),
    ("000:420", r"$\text{AllGather}_X(Y[D_X, F])$", (AG("X", T("Y", "D.X", "F")),)),
    (
        "000:420",
        r"$X[B, D_X] \cdot_D Y[D_X, F] \to Z[B, F] \{U_X\}$",
        (Arrow(P(T("X", "B", "D.X"), T("Y", "D.X", "F"), "D"), T("Z", "B", "F", u="X")),),
    ),
    ("000:420", r"$\text{AllReduce}_X(Z[B, F] \{ U_X\})$", (AR("X", T("Z", "B", "F", u="X")),)),
    (
        "000:446",
        r"$A[I, J] \cdot_J B[J, K] \to C[I, K]$",
        (Arrow(P(T("A", "I", "J"), T("B", "J", "K"), "J"), T("C", "I", "K")),),
    ),
    (
        "000:447",
        r"$A[I_X, J_Y] \cdot_J B[J_Y, K] \to C[I_X, K]$",
        (Arrow(P(T("A", "I.X", "J.Y"), T("B", "J.Y", "K"), "J"), T("C", "I.X", "K")),),
    ),
    (
        "000:448",
        r"$In[B, D] \cdot W_\text{in}[D, F] \cdot W_\text{out}[F, D]$",
        (P(P(T("In", "B", "D"), T("W_in", "D", "F")), T("W_out", "F", "D")),),
    ),
    # ---- 002
    ("002:14", r"$A[I_X,J_Y]$", (T("A", "I.X", "J.Y"),)),
    ("002:15", r"$A[I_{XY},J]$", (T("A", "I.XY", "J"),)),
    ("002:16", r"$A[I,J]$", (T("A", "I", "J"),)),
    ("002:17", r"$A[I_X,J_X]$", (T("A", "I.X", "J.X"),)),
    ("002:31", r"In[8, 2048]", (T("In", "8", "2048"),)),
    ("002:41", r"$[A_X,B]\to [A,B]$", (Arrow(T(None, "A.X", "B"), T(None, "A", "B")),)),
    ("002:42", r"$[A,B]\{U_X\}\to [A_X,B]$", (Arrow(T(None, "A", "B", u="X"), T(None, "A.X", "B")),)),
    ("002:43", r"$[A,B]\{U_X\}\to [A,B]$", (Arrow(T(None, "A", "B", u="X"), T(None, "A", "B")),)),
    ("002:44", r"$[A,B_X]\to [A_X,B]$", (Arrow(T(None, "A", "B.X"), T(None, "A.X", "B")),)),
    (
        "002:72",
        r"$$A[I_X,J]\cdot B[J,K_Y]\to C[I_X,K_Y]$$",
        (Arrow(P(A_IX_J, B_J_KY), T("C", "I.X", "K.Y")),),
    ),
    (
        "002:78",
        r"$$A[I,J_X]\stackrel{{\text{AllGather}}_X}{\to }A[I,J]\Rightarrow A[I,J]\cdot B[J,K]\to C[I,K]$$",
        (
            Arrow(AG("X", T("A", "I", "J.X")), T("A", "I", "J")),
            Arrow(P(T("A", "I", "J"), T("B", "J", "K")), T("C", "I", "K")),
        ),
    ),
    (
        "002:84",
        r"$$A[I,J_X]\cdot B[J_X,K]\to C[I,K]\{U_X\}$$",
        (Arrow(P(T("A", "I", "J.X"), T("B", "J.X", "K")), T("C", "I", "K", u="X")),),
    ),
    ("002:88", r"$C[I,K]\{U_X\}\to C[I,K]$", (Arrow(T("C", "I", "K", u="X"), T("C", "I", "K")),)),
    ("002:89", r"$C[I,K]\{U_X\}\to C[I,K_X]$", (Arrow(T("C", "I", "K", u="X"), T("C", "I", "K.X")),)),
    (
        "002:93",
        r"$$A[I_X,J]\cdot B[J,K_X]\text{(无效，必须先 AllGather 一个输入)}$$",
        (P(A_IX_J, T("B", "J", "K.X")),),
    ),
    ("002:102", r"$\text{In}[B_X,D]\cdot W[D,F]$", (P(T("In", "B.X", "D"), T("W", "D", "F")),)),
    ("002:103", r"$\text{In}[B_X,D]\cdot W[D_X,F]$", (P(T("In", "B.X", "D"), T("W", "D.X", "F")),)),
    ("002:104", r"$\text{In}[B,D_Y]\cdot W[D,F_Y]$", (P(T("In", "B", "D.Y"), T("W", "D", "F.Y")),)),
    ("002:105", r"$\text{In}[B_X,D_Y]\cdot W[D_X,F_Y]$", (P(T("In", "B.X", "D.Y"), T("W", "D.X", "F.Y")),)),
    # ---- 003 (Python strings of the lecture script)
    ("003:1", r"W[D, F]", (T("W", "D", "F"),)),
    ("003:1", r"W[D, F_X]", (T("W", "D", "F.X"),)),
    ("003:1", r"W[D_X, F]", (T("W", "D.X", "F"),)),
    ("003:1", r"A[B, D]", (T("A", "B", "D"),)),
    ("003:1", r"A[B_X, D]", (T("A", "B.X", "D"),)),
    ("003:1", r"A[I_X, J]·B[J, K] → C[I_X, K]", (Arrow(P(A_IX_J, T("B", "J", "K")), T("C", "I.X", "K")),)),
    (
        "003:1",
        r"A[I, J_X]·B[J, K] → C[I, K]",
        (Arrow(P(T("A", "I", "J.X"), T("B", "J", "K")), T("C", "I", "K")),),
    ),
    (
        "003:1",
        r"A[I, J_X]·B[J_X, K] → C[I, K]",
        (Arrow(P(T("A", "I", "J.X"), T("B", "J.X", "K")), T("C", "I", "K")),),
    ),
    ("003:1", r"C[I, K_X]", (T("C", "I", "K.X"),)),
    (
        "003:1",
        r"A[I_X, J]·B[J, K_X] → C[I_X, K]",
        (Arrow(P(A_IX_J, T("B", "J", "K.X")), T("C", "I.X", "K")),),
    ),
    ("003:1", r"C[I_X, K_X]", (T("C", "I.X", "K.X"),)),
    ("003:1", r"C[I, K]", (T("C", "I", "K"),)),
    ("003:1", r"A[B, D_X]·W[D_X, F]", (P(T("A", "B", "D.X"), T("W", "D.X", "F")),)),
    ("003:1", r"C[B, F]", (T("C", "B", "F"),)),
]

# Bracketed text in the seeds that is not the notation, with why.
NOT_NOTATION: list[tuple[str, str, str]] = [
    ("000:53", r"int8[128 / (2 * 8), 2048]", "arithmetic inside a shape (the worked answer's computation)"),
    ("000:396", r"$A[I_X, J, K, \ldots]$", r"\ldots (an elided rest of the dims) is not a dim"),
    ("000:400", r"$[I / 4, J, K, \ldots]", "arithmetic inside a shape"),
    ("000:412", r"$\text{AllGather}_{XZ}$", "an operator's name without an operand"),
    ("000:448", r"$W_\text{in}$", "a tensor's name without its dims"),
    ("003:1", r"W[D = {D}, F = {F}]", "a Python f-string template"),
    ("004:11", r"W=[W_1|W_2]", "block-matrix notation, not sharding"),
    ("004:57", r"x[W_1|W_2]=[xW_1|xW_2]", "block-matrix notation, not sharding"),
]
