"""npkit.emulator"""
