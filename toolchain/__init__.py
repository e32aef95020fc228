"""npkit.toolchain"""
