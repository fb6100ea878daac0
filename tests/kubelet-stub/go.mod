// The kubelet's side of the device plugin API, enough to run the real SR-IOV
// network device plugin in a guest (tests/system/test_l0_k8s_plugins.py).
module github.com/vsriov/vsriov/tests/kubelet-stub

go 1.24

require (
	google.golang.org/grpc v1.75.1
	k8s.io/kubelet v0.32.0
)

require (
	github.com/gogo/protobuf v1.3.2 // indirect
	golang.org/x/net v0.41.0 // indirect
	golang.org/x/sys v0.33.0 // indirect
	golang.org/x/text v0.26.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250707201910-8d1bb00bc6a7 // indirect
	google.golang.org/protobuf v1.36.6 // indirect
)
