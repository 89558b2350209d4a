catalog show a100-40gb-sxm4/3g.20gb
