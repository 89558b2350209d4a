compare h100-80gb-sxm5 a100-80gb-sxm4/3g.40gb --json
