perf --model llama-2-7b --gpu h100-80gb-sxm5 --batch 8 --input-tokens 4096 --output-tokens 64 --calibration tests/data/calibration/old/h100-80gb-sxm5-2020.json --driver 570.86.15
