bench --backend fake --fake-gpu h100-sxm5-80gb --seed 1 --budget 30
