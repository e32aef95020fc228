"""npkit.asm"""
