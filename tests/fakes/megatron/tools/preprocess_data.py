#!/usr/bin/env python3
"""Test double of Megatron-LM's tools/preprocess_data.py (not the real tool): takes the
arguments tplua passes, refuses to run unless the Hugging Face libraries are told to stay
offline, and writes <output-prefix>_text_document.{bin,idx} in the indexed format, one token
per byte of each line's "text" plus an end-of-document id 256 when --append-eod is given."""
import argparse
import json
import os
import struct
import sys

p = argparse.ArgumentParser()
p.add_argument("--input", required=True)
p.add_argument("--output-prefix", required=True)
p.add_argument("--tokenizer-type", required=True)
p.add_argument("--tokenizer-model", required=True)
p.add_argument("--append-eod", action="store_true")
p.add_argument("--workers", type=int, required=True)
a = p.parse_args()
if os.environ.get("HF_HUB_OFFLINE") != "1" or os.environ.get("TRANSFORMERS_OFFLINE") != "1":
    sys.exit("fake preprocess_data.py: not offline")
if a.tokenizer_type != "HuggingFaceTokenizer":
    sys.exit("fake preprocess_data.py: unexpected tokenizer type " + a.tokenizer_type)
docs = []
with open(a.input) as f:
    for line in f:
        if line.strip():
            ids = list(json.loads(line)["text"].encode())
            docs.append(ids + ([256] if a.append_eod else []))
prefix = a.output_prefix + "_text_document"
with open(prefix + ".bin", "wb") as f:
    for d in docs:
        f.write(struct.pack("<%dH" % len(d), *d))
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(docs), len(docs) + 1))
    f.write(struct.pack("<%di" % len(docs), *[len(d) for d in docs]))
    off, ptrs = 0, []
    for d in docs:
        ptrs.append(off)
        off += 2 * len(d)
    f.write(struct.pack("<%dq" % len(docs), *ptrs))
    f.write(struct.pack("<%dq" % (len(docs) + 1), *range(len(docs) + 1)))
print("fake preprocess_data.py: %d documents" % len(docs))
