// SPDX-License-Identifier: GPL-2.0-or-later

// Command kubelet-stub is the kubelet's side of the device plugin API
// (k8s.io/kubelet's deviceplugin/v1beta1), no more than a real device
// plugin needs to run without a kubelet:
//
//	kubelet-stub serve [-dir /var/lib/kubelet/device-plugins] -devices FILE
//	kubelet-stub allocate -devices FILE RESOURCE DEVICE-ID...
//
// serve listens on DIR/kubelet.sock for Register.  For each plugin that
// registers it connects to DIR/<endpoint>, calls ListAndWatch and, on every
// list the plugin sends, writes what it knows of every resource to FILE
// (JSON, replaced atomically, so a reader never sees half of it):
//
//	{"vsriov.io/vf": {"endpoint": "/var/lib/kubelet/device-plugins/vsriov.io_vf.sock",
//	                  "connected": true,
//	                  "devices": {"0000:01:00.1": "Healthy"}}}
//
// When a plugin's stream ends, its devices become Unhealthy, as the
// kubelet marks them; a plugin that registers the resource again replaces
// the old one.
//
// allocate asks the plugin serving RESOURCE (found in FILE) to Allocate
// DEVICE-IDs for one container, as the kubelet does when it creates the
// container, and prints the plugin's answer as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// resource is what the stub knows of one registered resource.
type resource struct {
	Endpoint  string            `json:"endpoint"`
	Connected bool              `json:"connected"`
	Devices   map[string]string `json:"devices"` // device ID -> health
	gen       int               // which registration owns the entry
}

// registry serves Register and keeps every resource's latest device list
// in a file.
type registry struct {
	dir, devicesFile string

	mu        sync.Mutex
	resources map[string]*resource
	gens      int
}

// Register accepts a v1beta1 plugin and starts watching it; like the
// kubelet, it answers before it connects to the plugin.
func (r *registry) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("device plugin API version %q is not %q", req.Version, pluginapi.Version)
	}
	endpoint := filepath.Join(r.dir, req.Endpoint)
	r.mu.Lock()
	r.gens++
	gen := r.gens
	r.resources[req.ResourceName] = &resource{Endpoint: endpoint, Devices: map[string]string{}, gen: gen}
	r.writeLocked()
	r.mu.Unlock()
	log.Printf("%s registered at %s", req.ResourceName, endpoint)
	go r.watch(req.ResourceName, endpoint, gen)
	return &pluginapi.Empty{}, nil
}

// watch follows one registration's ListAndWatch stream until it ends.
func (r *registry) watch(name, endpoint string, gen int) {
	err := listAndWatch(endpoint, func(devs []*pluginapi.Device) {
		r.update(name, gen, func(res *resource) {
			res.Connected = true
			res.Devices = map[string]string{}
			for _, d := range devs {
				res.Devices[d.ID] = d.Health
			}
		})
		log.Printf("%s: %d devices", name, len(devs))
	})
	log.Printf("%s: ListAndWatch ended: %v", name, err)
	r.update(name, gen, func(res *resource) {
		res.Connected = false
		for id := range res.Devices {
			res.Devices[id] = pluginapi.Unhealthy
		}
	})
}

func listAndWatch(endpoint string, onList func([]*pluginapi.Device)) error {
	conn, err := grpc.NewClient("unix:"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := pluginapi.NewDevicePluginClient(conn).ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		onList(resp.Devices)
	}
}

// update applies change to resource name if registration gen still owns
// it, and writes the file.
func (r *registry) update(name string, gen int, change func(*resource)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.resources[name]
	if res == nil || res.gen != gen {
		return
	}
	change(res)
	r.writeLocked()
}

func (r *registry) writeLocked() {
	data, err := json.MarshalIndent(r.resources, "", "  ")
	if err == nil {
		tmp := r.devicesFile + ".tmp"
		if err = os.WriteFile(tmp, append(data, '\n'), 0o644); err == nil {
			err = os.Rename(tmp, r.devicesFile)
		}
	}
	if err != nil {
		log.Printf("writing %s: %v", r.devicesFile, err)
	}
}

func serve(dir, devicesFile string) error {
	sock := filepath.Join(dir, "kubelet.sock")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	r := &registry{dir: dir, devicesFile: devicesFile, resources: map[string]*resource{}}
	r.writeLocked()
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, r)
	log.Printf("serving %s", sock)
	return srv.Serve(lis)
}

func allocate(devicesFile, name string, ids []string) error {
	data, err := os.ReadFile(devicesFile)
	if err != nil {
		return err
	}
	var resources map[string]*resource
	if err := json.Unmarshal(data, &resources); err != nil {
		return fmt.Errorf("%s: %w", devicesFile, err)
	}
	res := resources[name]
	if res == nil {
		return fmt.Errorf("no plugin has registered %s", name)
	}
	conn, err := grpc.NewClient("unix:"+res.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := pluginapi.NewDevicePluginClient(conn).Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIDs: ids}},
	})
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(resp, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: kubelet-stub serve [-dir DIR] -devices FILE\n"+
		"       kubelet-stub allocate -devices FILE RESOURCE DEVICE-ID...\n")
	os.Exit(2)
}

func main() {
	log.SetPrefix("kubelet-stub: ")
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	devicesFile := fs.String("devices", "", "the file of every resource's devices (JSON)")
	var err error
	switch os.Args[1] {
	case "serve":
		dir := fs.String("dir", pluginapi.DevicePluginPath, "the kubelet's device plugin folder")
		_ = fs.Parse(os.Args[2:])
		if *devicesFile == "" || fs.NArg() != 0 {
			usage()
		}
		err = serve(*dir, *devicesFile)
	case "allocate":
		_ = fs.Parse(os.Args[2:])
		if *devicesFile == "" || fs.NArg() < 2 {
			usage()
		}
		err = allocate(*devicesFile, fs.Arg(0), fs.Args()[1:])
	default:
		usage()
	}
	if err != nil {
		log.Fatal(err)
	}
}
