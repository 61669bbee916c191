"""One lock for the verifier's process-wide state, so that proofs and launch-site checks from several threads take turns: the Z3
context each goal swaps in is z3py's default one (check.fresh_z3_context), and CPython 3.11's `ast` parser
keeps a recursion counter that concurrent parses corrupt ("AST constructor recursion depth mismatch")."""
import threading

LOCK = threading.RLock()
