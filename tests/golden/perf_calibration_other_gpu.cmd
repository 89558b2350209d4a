perf --model llama-2-7b --gpu a100-80gb-sxm4 --calibration tests/data/calibration/h100-80gb-sxm5.json
