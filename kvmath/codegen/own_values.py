"""The symbols a reader of the calculator may set to their own values (no SymPy here: the
answer path reads them). Their bounds come from the table fields they stand for
(kvmath.present.calculator)."""

#: architecture symbols a reader may override (the model row's fields as symbols)
MODEL_SYMBOLS = ("d", "n_q", "L_full", "L_win", "W", "n_kv", "d_h", "r_kv", "d_rope", "d_nope",
                 "r_q", "I_ffn", "I_exp", "E", "k_top", "E_sh", "L_dense", "L_moe", "V", "tied",
                 "d_qk", "d_v", "L_rec", "n_rk", "n_rv", "d_rk", "d_rv", "k_conv", "b_st")
#: GPU symbols a reader may override
GPU_SYMBOLS = ("P", "B_hbm", "C_hbm", "N_node")
