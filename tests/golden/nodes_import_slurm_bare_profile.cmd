nodes import-slurm --file tests/data/slurm/scontrol_show_node_o.txt --node gpu03 --gpu-type a100-80gb-sxm4
