"""npkit.asm.base: the helpers every layer reads and writes with (YAML with line marks, located errors, schemas, outputs, the content cache)."""
