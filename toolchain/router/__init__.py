"""Router data structures built on the host: the LPM trie in SRAM and its next-hop table.

Layout (the single reference for the microcode and the XScale daemon):
microcode/lookup/LAYOUT.md.  SRAM regions: microcode/lookup/sram_map.yaml.
"""
