#!/usr/bin/env python3
#===- bench/record_graphs.py - real models' backward graphs, for CI -------===#
"""Compiles small blocks of real models' norm spellings with torch.compile
(Inductor, no norm_opt routing), rows dynamic, and records the backward
graph Inductor hands to its post-grad passes (norm_opt.fx_record), one
JSON bundle {model: graph}. The graphs are checked in under
test/Import/graphs/ and imported in CI (norm_opt.fx_import), where there is
no torch. Needs torch and a GPU.
  python3 bench/record_graphs.py --out graphs.json [--hidden 1024]
"""

import argparse
import json
import sys

import torch
import torch.nn as nn

from norm_opt import fx_record
from norm_opt.testing import (AdaLNBlock, CohereLayerNorm, GemmaRMSNorm,
                              GroupNormBlock, LlamaRMSNorm, OlmoLayerNorm)


class Block(nn.Module):
    def __init__(self, norm, n):
        super().__init__()
        self.up, self.norm, self.down = nn.Linear(n, n), norm, nn.Linear(n, n)

    def forward(self, x):
        return self.down(self.norm(self.up(x)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--only", default="", help="comma-separated model names")
    args = p.parse_args()
    n = args.hidden
    models = {
        "llama_rmsnorm": Block(LlamaRMSNorm(n), n),
        "gemma_rmsnorm": Block(GemmaRMSNorm(n), n),
        "nn_layernorm": Block(nn.LayerNorm(n), n),
        "nn_rmsnorm": Block(nn.RMSNorm(n), n),
        "olmo_layernorm": Block(OlmoLayerNorm(n), n),
        "cohere_layernorm_f32": Block(CohereLayerNorm(n), n),
        "dit_adaln": AdaLNBlock(n),
        "group_norm_nchw_bf16": GroupNormBlock(),
        "group_norm_nhwc_bf16": GroupNormBlock(),
        "group_norm_nchw_f32": GroupNormBlock(),
        "group_norm_nhwc_f32": GroupNormBlock(),
        "group_norm_static_cl_bf16": GroupNormBlock(),
        "group_norm_static_cl_f32": GroupNormBlock(),
    }
    only = [m for m in args.only.split(",") if m]
    bundle = {}
    for name, model in models.items():
        if only and name not in only:
            continue
        torch._dynamo.reset()
        dtype = torch.float32 if name.endswith("f32") else torch.bfloat16
        if name.startswith("group_norm"):
            layout = (torch.channels_last if "nhwc" in name
                      else torch.contiguous_format)
            model = model.cuda().to(dtype).to(memory_format=layout)
            x = torch.randn(2, 320, 8, 8, device="cuda", dtype=dtype)
            x = x.to(memory_format=layout).requires_grad_()
        else:
            model = model.cuda().to(dtype)
            x = torch.randn(8, 128, n, device="cuda", dtype=dtype,
                            requires_grad=True)
        if "static" not in name:
            torch._dynamo.mark_dynamic(x, 0)
        inputs = [x]
        if name == "dit_adaln":
            c = torch.randn(8, n, device="cuda", dtype=dtype)
            torch._dynamo.mark_dynamic(c, 0)
            inputs.append(c)
        with fx_record.recording() as graphs:
            torch.compile(model)(*inputs).float().square().mean().backward()
        backward = [g for g in graphs if any(
            node["op"] == "placeholder" and node["name"].startswith("tangents")
            for node in g["nodes"])]
        if len(backward) != 1:
            print(f"FAIL {name}: {len(graphs)} graphs, {len(backward)} backward",
                  flush=True)
            return 1
        bundle[name] = dict(backward[0], name=f"{name}_backward")
        ops = sorted({node.get("target") for node in backward[0]["nodes"]
                      if node["op"] == "call_function"})
        print(f"{name}: {len(backward[0]['nodes'])} nodes; {', '.join(ops)}",
              flush=True)
    with open(args.out, "w") as f:
        json.dump(bundle, f, indent=0, sort_keys=True)
    print(f"{len(bundle)} graphs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
