// SPDX-License-Identifier: Apache-2.0

package utils

// Not part of the series: sriov-cni's pkg/utils has its own suite
// (utils_suite_test.go, which also builds its fake sysfs).  This runs the
// series' Ginkgo specs (netdev_sysfs_test.go) in this module on their own.

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestNetdevSysfs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Netdev sysfs Suite")
}
