k8s render --rental-id r_1 --generation 1 --tenant t_1 --node-id n_1 --node gpu-1 --gpu-uuid GPU-1 --profile 3g.40gb --image 'Bad Image:latest'
