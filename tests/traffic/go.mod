// Test traffic for guests (tests/nested/test_l2_e2e.py, scripts/bench-pods):
// UDP streams and request/response latency, standard library only.
module github.com/vsriov/vsriov/tests/traffic

go 1.22
