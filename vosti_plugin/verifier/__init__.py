"""vosti kernel verifier: Z3-checked relational contracts over a small tile IR of Triton kernels.

Passes, one module each:
  frontend   Python source of a @triton.jit kernel -> ir (frozen dataclasses); outside the subset -> Unsupported
  symbolic   one invocation (left or right) of one symbolic program -> stores, loops, element terms
  relational equality of two element terms: case splits on masks, aligned reductions, loop induction
  noop       value analysis: is an iteration that only one side runs an exact no-op for the selected row?
  outputs    output goals: coverage, write races, stored values, write frames
  memory     the launch's memory and integer model: read-after-write within the launch, int32 overflow,
             truncating division, store bounds (sizes below 2**30, contract `bounds` facts)
  spec       contract expressions -> Z3 hypotheses and equal regions
  smt        Z3 plumbing (resource-limited, cached, symbolic constexprs linearized over their catalog values)
  launch     host launch sites: constexprs (keyword or positional) and `same` scalars not chosen from the
             batch, no @triton.autotune / @triton.heuristics, the launch grid is the contract's grid
  report     obligations, results, rich table / JSON
  api        verify_kernel, verify_catalog, catalog_plan, proved_configs
  fingerprint what a cached proof depends on (import closures of the kernel modules and of the proof code)
  bench      `python -m vosti_plugin.verifier.bench`: cold and cached whole-catalog verification times
Contracts are written above each shipped kernel (`@contract(...)` over `@triton.jit`, plain data: importing
them does not import Z3); each kernel module lists its own configs (verifier_catalog(), modules named by vosti_plugin/kernel_catalog.py).
"""
from vosti_plugin.verifier.contracts import contract, goal, scalar, tensor

__all__ = ["contract", "goal", "scalar", "tensor"]
