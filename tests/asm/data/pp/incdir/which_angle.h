angle_incdir    ; include_dirs win for <...>
