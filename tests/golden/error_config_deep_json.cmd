fit --json --gpu a40 --model /dev/stdin < <(printf '{"a":%.0s' {1..100000}; printf 1; printf '}%.0s' {1..100000})
