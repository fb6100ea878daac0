// The sysfs helpers that sriov-cni-patch/ adds to
// k8snetworkplumbingwg/sriov-cni's pkg/utils, built and tested here on
// their own: the series' files verbatim, with a Ginkgo runner and a test
// on a live sysfs that are ours (suite_test.go, live_test.go).
module github.com/vsriov/vsriov/sriov-cni-patch

go 1.23.0

require (
	github.com/onsi/ginkgo/v2 v2.23.4
	github.com/onsi/gomega v1.37.0
)

require (
	github.com/go-logr/logr v1.4.2 // indirect
	github.com/go-task/slim-sprig/v3 v3.0.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/pprof v0.0.0-20250403155104-27863c87afa6 // indirect
	go.uber.org/automaxprocs v1.6.0 // indirect
	golang.org/x/net v0.37.0 // indirect
	golang.org/x/sys v0.32.0 // indirect
	golang.org/x/text v0.23.0 // indirect
	golang.org/x/tools v0.31.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
