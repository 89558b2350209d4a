admin init --data-dir "${gp_golden_dir:=$(mktemp -d)}" --json >/dev/null && "$bin" admin init --data-dir "$gp_golden_dir"; gp_golden_rc=$?; rm -rf "$gp_golden_dir"; (exit $gp_golden_rc)
