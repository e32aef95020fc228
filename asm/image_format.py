"""The image format's version and limits, which the image reader (npkit.asm.image) and
its metadata schema (npkit.asm.image_schema) both check against."""

FORMAT_VERSION = 1
MAX_USTORE = 8192
MAX_MES = 32
WORD_LIMIT = 1 << 40
IMAGE_LIMIT = 256 << 20  # bytes: an image file larger than this is refused unread
