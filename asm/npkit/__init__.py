"""npkit: microcode toolkit and emulator for IXP2800-class network processors."""
