#!/usr/bin/python3
"""Reference bytes for mooncake4j's side-channel codecs.

Writes <name>.bin and <name>.hex next to this script. Each message is built the way
msgspec encodes vLLM's structs (omit_defaults=True, not array_like): a map keyed by the
field names in declaration order, default-valued optional fields left out, and packed with
Python's msgpack (use_bin_type=True), which like msgspec picks the smallest int/str/array/map
forms. Run with Debian's interpreter: /usr/bin/python3 generate_golden.py (python3-msgpack).
The Java test MooncakeXferGoldenTest rebuilds the same values and compares bytes.
"""
import os
import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))

META_FIELDS = [  # (name, default or REQUIRED)
    ("remote_hostname", None), ("remote_port", None), ("remote_tp_size", None),
    ("remote_tp_rank", None), ("req_blocks", None), ("kv_caches_base_addr", None),
    ("block_lens", None), ("kv_block_lens", None),
    ("registered_layer_names", []), ("registered_layer_indices", []),
    ("registered_group_indices", []), ("remote_pp_size", 1),
]
RESP_FIELDS = [("status", None), ("ok_reqs", None), ("err_reqs", None), ("err_msg", None)]
REQUIRED_META = {"remote_hostname", "remote_port", "remote_tp_size", "remote_tp_rank",
                 "req_blocks", "kv_caches_base_addr", "block_lens", "kv_block_lens"}


def struct(fields, required, values):
    out = {}
    for name, default in fields:
        if name not in values:
            continue
        v = values[name]
        if name not in required and v == default:
            continue  # omit_defaults
        if isinstance(v, tuple):
            v = list(v)
        out[name] = v
    return out


def meta(**kw):
    kw["req_blocks"] = {k: [t, g] for k, (t, g) in kw["req_blocks"].items()}
    return struct(META_FIELDS, REQUIRED_META, kw)


def resp(**kw):
    return struct(RESP_FIELDS, {"status"}, kw)


BASE = 0x7F3A_0000_0000  # a typical CUDA VA (~2^47)

MESSAGES = {
    "metadata_minimal": meta(
        remote_hostname="127.0.0.1", remote_port=12345, remote_tp_size=1, remote_tp_rank=0,
        req_blocks={"d-req-1": ("xfer-req-1", [[100, 101]])},
        kv_caches_base_addr=[BASE], block_lens=[16384], kv_block_lens=[16384],
        registered_layer_names=[], registered_layer_indices=[], registered_group_indices=[],
        remote_pp_size=1),
    "metadata_full": meta(
        remote_hostname="10.0.0.17", remote_port=65535, remote_tp_size=4, remote_tp_rank=3,
        req_blocks={
            "cmpl-0123456789abcdef0123456789abcdef-0": (
                "xfer-" + "t" * 300,
                [[0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296], [], [7]]),
            "d-\u00e9\u4e2d-2": ("xfer-2", [[5], [6], [7]]),
        },
        kv_caches_base_addr=[BASE, BASE + 0x4000_0000, (1 << 47) + 1, (1 << 62) + 3, (1 << 63) - 1],
        block_lens=[16384, 16384, 3072, 255, 1 << 40],
        kv_block_lens=[8192, 16384, 3072, 128, 1 << 33],
        registered_layer_names=["model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn",
                                "model.layers.31.mlp.experts.linear_attn.conv", "l3", "l4"],
        registered_layer_indices=[0, 1, 31, 3, 200],
        registered_group_indices=[0, 0, 1, 2, 2],
        remote_pp_size=2),
    "metadata_many": meta(
        remote_hostname="fe80::1", remote_port=40000, remote_tp_size=8, remote_tp_rank=5,
        req_blocks={"r%d" % i: ("x%d" % i, [list(range(i * 20, i * 20 + 20))]) for i in range(20)},
        kv_caches_base_addr=[BASE + i * 0x100000 for i in range(20)],
        block_lens=[2 ** 17] * 20, kv_block_lens=[2 ** 16] * 20,
        registered_layer_indices=list(range(20))),
    "metadata_empty_reqs": meta(
        remote_hostname="h", remote_port=1, remote_tp_size=1, remote_tp_rank=0,
        req_blocks={}, kv_caches_base_addr=[], block_lens=[], kv_block_lens=[]),
    "response_finish_ok": resp(status=0, ok_reqs=["d-req-1"]),
    "response_continue": resp(status=1, ok_reqs=["a", "b", "c"]),
    "response_finish_err": resp(status=0, ok_reqs=["ok-1"], err_reqs=["bad-1", "bad-2"],
                                err_msg="Timeout waiting for P side ready."),
    "response_error": resp(status=2, err_msg="Mooncake transfer engine returned -1; P num blocks less than D " + "x" * 40),
    "response_finish_empty": resp(status=0),
}

# Integer boundaries, to check the writer's smallest-form choice value by value.
INTS = [0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 63 - 1,
        -1, -32, -33, -128, -129, -32768, -32769, -2 ** 31, -2 ** 31 - 1, -2 ** 63]
STRS = ["", "a" * 31, "b" * 32, "c" * 255, "d" * 256, "\u00e9\u4e2d\U0001F600"]


def main():
    out = dict(MESSAGES)
    out["ints"] = INTS
    out["strs"] = STRS
    out["uint64_max"] = [2 ** 63, 2 ** 64 - 1]
    out["containers"] = [list(range(15)), list(range(16)), {str(i): i for i in range(15)},
                         {str(i): i for i in range(16)}]
    for name, obj in out.items():
        data = msgpack.packb(obj, use_bin_type=True)
        with open(os.path.join(HERE, name + ".bin"), "wb") as f:
            f.write(data)
        with open(os.path.join(HERE, name + ".hex"), "w") as f:
            f.write(data.hex() + "\n")


if __name__ == "__main__":
    main()
