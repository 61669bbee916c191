"""Batch-invariant dense ops (matmul/linear, RMSNorm, softmax family) and their installation.

Importing this package does not import Triton: the kernel modules must be imported only after
TRITON_INTERPRET is settled (see vosti_plugin.triton_mode). Entry points: `vosti_plugin.ops.install`.
"""
