#!/usr/bin/env python3
"""llama.cpp's intermediate tensors of one prompt, for finding where a port
departs from it (not run by CI; needs llama-cpp-python from
`cargo xtask llm-reference`'s venv).

    llm_dump.py MODEL.gguf '[2, 818, 5279]' OUT.npz [FLASH_ATTN]

Every f32 tensor llama.cpp computes for the prompt's tokens (names as its
graph gives them: `attn_norm-0`, `Qcur-0`, `kq-0`, `kqv_out-0`, `l_out-0`,
`result_output`, ...; repeated names get `#1`, `#2`), saved to OUT.npz as
[ne3, ne2, ne1, ne0]. FLASH_ATTN is llama.cpp's flash_attn_type (-1 auto,
0 off as llama-cpp-python's `Llama` default, 1 on); default auto.
"""
import ctypes, sys, json, numpy as np
import llama_cpp as L
# ggml.h's `struct ggml_tensor` (GGML_MAX_DIMS 4, GGML_MAX_OP_PARAMS 64,
# GGML_MAX_SRC 10, GGML_MAX_NAME 64).
class T(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64*4), ("nb", ctypes.c_size_t*4),
                ("op", ctypes.c_int), ("op_params", ctypes.c_int32*16), ("flags", ctypes.c_int32), ("src", ctypes.c_void_p*10),
                ("view_src", ctypes.c_void_p), ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char*64),
                ("extra", ctypes.c_void_p), ("padding", ctypes.c_char*8)]
out = {}
def cb(tp, ask, ud):
    """Asks for every tensor, then copies each f32 one as it is computed."""
    if ask: return True
    t = ctypes.cast(tp, ctypes.POINTER(T)).contents
    name = t.name.decode()
    if t.type == 0 and t.data:
        ne = list(t.ne); nb = list(t.nb)
        n = ne[0]*ne[1]*ne[2]*ne[3]
        # strided read
        buf = (ctypes.c_char * (nb[3]*ne[3])).from_address(t.data)
        a = np.lib.stride_tricks.as_strided(np.frombuffer(buf, dtype=np.uint8), shape=(ne[3],ne[2],ne[1],ne[0]*4), strides=(nb[3],nb[2],nb[1],1))
        a = np.ascontiguousarray(a).view(np.float32).reshape(ne[3],ne[2],ne[1],ne[0])
        key = name
        i = 0
        while key in out: i += 1; key = f"{name}#{i}"
        out[key] = a.copy()
    return True
CB = L.ggml_backend_sched_eval_callback(cb)
L.llama_backend_init()
mp = L.llama_model_default_params()
model = L.llama_model_load_from_file(sys.argv[1].encode(), mp)
cp = L.llama_context_default_params(); cp.n_ctx = 512; cp.n_threads = 1; cp.n_threads_batch = 1
cp.cb_eval = CB
cp.flash_attn_type = int(sys.argv[4]) if len(sys.argv) > 4 else cp.flash_attn_type
ctx = L.llama_init_from_model(model, cp)
ids = json.loads(sys.argv[2])
arr = (ctypes.c_int32*len(ids))(*ids)
assert L.llama_decode(ctx, L.llama_batch_get_one(arr, len(ids))) == 0
np.savez(sys.argv[3], **out)
print(len(out), list(out)[:60])
