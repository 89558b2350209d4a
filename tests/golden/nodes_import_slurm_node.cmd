nodes import-slurm --file tests/data/slurm/scontrol_show_node_o.txt --node gpu01
