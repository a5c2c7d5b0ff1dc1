// Package podresourcestest serves the kubelet's PodResources API (v1) on a
// unix socket from answers a test sets, so the agent's client runs against
// a real gRPC server as it does against the kubelet.
package podresourcestest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"
)

// Server is a PodResources server on Socket.
type Server struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	Socket string

	srv  *grpc.Server
	mu   sync.Mutex
	resp *podresourcesapi.ListPodResourcesResponse
	// lists counts List calls.
	lists int
}

// Start serves an empty answer on a new socket until the test ends. The
// directory is short: a unix socket's path has at most 107 bytes.
func Start(t testing.TB) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "pr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{Socket: filepath.Join(dir, "kubelet.sock"), resp: &podresourcesapi.ListPodResourcesResponse{}}
	s.serve(t)
	return s
}

func (s *Server) serve(t testing.TB) {
	t.Helper()
	l, err := net.Listen("unix", s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(s.srv, s)
	go s.srv.Serve(l)
	t.Cleanup(s.Stop)
}

// Stop stops serving and removes the socket, as a kubelet going away does.
func (s *Server) Stop() {
	s.srv.Stop()
	os.Remove(s.Socket)
}

// Restart serves again on the same socket, as a kubelet back from a
// restart does.
func (s *Server) Restart(t testing.TB) { s.serve(t) }

// Set replaces the answer to List.
func (s *Server) Set(resp *podresourcesapi.ListPodResourcesResponse) {
	s.mu.Lock()
	s.resp = resp
	s.mu.Unlock()
}

// Lists is how many List calls the server answered.
func (s *Server) Lists() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// List answers the answer set last.
func (s *Server) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	if s.resp == nil {
		return nil, status.Error(codes.Unavailable, "no answer set")
	}
	return s.resp, nil
}

// Use is one device a container uses through one of its pod's claims.
type Use struct {
	Namespace, Pod, Container string
	ClaimNamespace, Claim     string
	Driver, Pool, Device      string
	ShareID                   string
}

// Response is the kubelet's List answer for uses: one pod per namespace
// and name, one container per name, one dynamic resource per claim, in the
// order first named.
func Response(uses ...Use) *podresourcesapi.ListPodResourcesResponse {
	resp := &podresourcesapi.ListPodResourcesResponse{}
	pods := map[[2]string]*podresourcesapi.PodResources{}
	ctrs := map[[3]string]*podresourcesapi.ContainerResources{}
	claims := map[[5]string]*podresourcesapi.DynamicResource{}
	for _, u := range uses {
		pk := [2]string{u.Namespace, u.Pod}
		p := pods[pk]
		if p == nil {
			p = &podresourcesapi.PodResources{Namespace: u.Namespace, Name: u.Pod}
			pods[pk] = p
			resp.PodResources = append(resp.PodResources, p)
		}
		ck := [3]string{u.Namespace, u.Pod, u.Container}
		c := ctrs[ck]
		if c == nil {
			c = &podresourcesapi.ContainerResources{Name: u.Container}
			ctrs[ck] = c
			p.Containers = append(p.Containers, c)
		}
		dk := [5]string{u.Namespace, u.Pod, u.Container, u.ClaimNamespace, u.Claim}
		d := claims[dk]
		if d == nil {
			d = &podresourcesapi.DynamicResource{ClaimNamespace: u.ClaimNamespace, ClaimName: u.Claim}
			claims[dk] = d
			c.DynamicResources = append(c.DynamicResources, d)
		}
		r := &podresourcesapi.ClaimResource{DriverName: u.Driver, PoolName: u.Pool, DeviceName: u.Device,
			CdiDevices: []*podresourcesapi.CDIDevice{{Name: u.Driver + "/gpu=" + u.Claim + "-" + u.Device}}}
		if u.ShareID != "" {
			r.ShareId = ptr.To(u.ShareID)
		}
		d.ClaimResources = append(d.ClaimResources, r)
	}
	return resp
}
