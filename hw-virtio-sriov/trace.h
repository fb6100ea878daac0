#include "trace/trace-hw_virtio_sriov.h"
