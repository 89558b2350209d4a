compare a100-40gb-sxm4 a100-80gb-sxm4 a40
