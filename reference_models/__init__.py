"""Reference sequence mixers (installed as `ssmbench.reference_models`): name -> ("module:Class", summary).

Each summary is the first line of the class docstring (a test keeps them equal). Reading this table imports
nothing heavy; `ssmbench.registry.models.get(name)` imports the module on first use.
"""

BUILTIN: dict[str, tuple[str, str]] = {
    "dlr": (
        "ssmbench.reference_models.dlr:DLR",
        "Diagonal linear RNN (DLR, DLR-prod, DLR-R): GELU(K * u + D u) with K_h[k] = cast(sum_n W_hn Lambda_n^k)."),
    "dss_exp": (
        "ssmbench.reference_models.dss_exp:DSSExp",
        "Diagonal state space DSS_EXP: GELU(K * u + D u), K from a zero-order-hold discretised diagonal SSM."),
    "s4d": (
        "ssmbench.reference_models.s4d:S4D",
        "Diagonal state space S4D (S4D-Lin init): GELU(K * u + D u), A and dt per channel, conjugate pairs."),
    "s4": (
        "ssmbench.reference_models.s4:S4",
        "Structured state space S4 (DPLR, HiPPO-LegS init): GELU(K * u + D u), K from a Cauchy kernel and an inverse FFT."),
    "sgconv": (
        "ssmbench.reference_models.sgconv:SGConv",
        "Structured global convolution SGConv: GELU(K * u + D u), K = concat_i alpha^i interp(w_i, 2^max(0,i-1))."),
    "lru": (
        "ssmbench.reference_models.lru:LRU",
        "Linear Recurrent Unit: GELU(Re(C x_k) + D u_k), x_k = Lambda x_{k-1} + gamma * (B u_k), ring init."),
    "mamba": (
        "ssmbench.reference_models.mamba:Mamba",
        "Mamba selective SSM mixer (S6): W_out(scan(SiLU(conv(W_x u)); Delta, B, C from the input) * SiLU(W_z u))."),
    "lstm": (
        "ssmbench.reference_models.lstm:LSTM",
        "LSTM mixer (torch's nn.LSTM, causal only): h_t = sigmoid(o) tanh(c_t), c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g)."),
    "deltanet": (
        "ssmbench.reference_models.deltanet:DeltaNet",
        "DeltaNet (delta rule, multi-head): W_o(RMSNorm(o)), o_t = S_t q_t, S_t = S_{t-1}(I - beta_t k_t k_t^T) + beta_t v_t k_t^T."),
    "attention": (
        "ssmbench.reference_models.attention:Attention",
        "Multi-head attention (4 heads, RoPE, learnable temperature): u + GELU(O(softmax(s q k^T) v))."),
    "local_attention": (
        "ssmbench.reference_models.local_attention:LocalAttention",
        "Chunked local attention (chunks of 1024, neighbour chunks visible): u + GELU(O(MHA_local(u)))."),
    "las": (
        "ssmbench.reference_models.las:LaS",
        "Local-and-smooth attention (8 heads, ELD decay, causal average pooling): u + GELU(O(LaS(u)))."),
    "las_chunk": (
        "ssmbench.reference_models.las_chunk:LaSChunk",
        "Chunked LaS attention (chunks of 128, 8 heads, ELD decay, causal pooling): u + GELU(O(LaS_chunk(u)))."),
}
