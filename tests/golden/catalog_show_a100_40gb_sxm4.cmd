catalog show a100-40gb-sxm4
