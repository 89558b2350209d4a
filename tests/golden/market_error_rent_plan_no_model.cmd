rent --plan --server http://127.0.0.1:1 --token gpl_wrong --rate 2
