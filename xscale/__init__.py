"""npkit.xscale"""
