#===- random_check_tiers.py - gpu_random_check.py's view of tiers ------===#
"""Prints what test/gpu/gpu_random_check.py makes of a run-time N's plan
(its resident tiers) and of the kernels a call launched
(check-scripts.test)."""
import sys

# test/gpu (its scripts are no package); norm_opt and test/lib-python
# come from lit's PYTHONPATH.
sys.path.insert(0, sys.argv[1])
import gpu_random_check as g  # noqa: E402

TIER = ("#norm.resident_tier<cols = %d, vector = 8, threads_per_row = 128, "
        "rows_per_cta = 1, chunks_per_thread = 3, block = 128, "
        "combine_in_cta = false, single_launch = true, async_stages = %d, "
        "final_threads = 128, dynamic_shared_bytes = 0>")
IR = """func.func @f(%x: tensor<?x?xbf16>) {
  %r = norm.mixed_reduction {norm.gpu = #norm.kernel_plan<kernel = "f_0", \
vector = 8, threads_per_row = 512, rows_per_cta = 1, chunks_per_thread = 0, \
async_stages = 0, column_groups = 1, tiers = [""" + TIER % (256, 0) + ", " + \
    TIER % (3072, 3) + "]>}"
plan = g.parse_plans(IR)["f"][0]
print("tiers", [t["cols"] for t in plan["tiers"]])
for n, kernels in ((3072, "f_0_tier3072_main_scalar:coop:132;"),
                   (3000, "f_0_tier3072_main:plain:132;f_0_final_128:plain:94;"),
                   (2999, "f_0_tier3072_main_peel:plain:128;f_0_final_128:plain:94;"),
                   (9000, "f_0_main:plain:132;f_0_final:plain:282;")):
    print(n, sorted(g.variants_of(plan, kernels, n)))
