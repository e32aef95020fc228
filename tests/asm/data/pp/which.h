which_local     ; the including file's directory wins for "..."
