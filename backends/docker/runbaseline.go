package docker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// RunBaseline runs `docker run --rm IMAGE true` n times through the Engine API, j at a time,
// as the docker CLI does it (create with auto-remove, wait for removal, start), with this
// backend's image: the baseline `hermes-sandbox bench --ephemeral` sets an ephemeral task
// against. It returns each run's duration.
func (b *Backend) RunBaseline(ctx context.Context, n, j int) (string, []time.Duration, error) {
	if err := b.prepare(ctx); err != nil {
		return "", nil, err
	}
	img := b.image()
	ds := make([]time.Duration, n)
	jobs := make(chan int)
	errs := make(chan error, j)
	var wg sync.WaitGroup
	for range max(1, j) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t := time.Now()
				if err := b.runRm(ctx, img); err != nil {
					errs <- err
					return
				}
				ds[i] = time.Since(t)
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case jobs <- i:
		case err = <-errs:
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("docker run --rm %s true (Engine API: create, wait, start)", img), ds, nil
}

// runRm is one `docker run --rm img true`.
func (b *Backend) runRm(ctx context.Context, img string) error {
	labels := map[string]string{labelOurs: "1", labelScope: b.scope, labelRole: "baseline"}
	resp, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: img, Cmd: []string{"true"}, Labels: labels},
		HostConfig: &container.HostConfig{AutoRemove: true},
	})
	if err != nil {
		return b.engineErr("baseline create", img, err)
	}
	// Waiting starts before the start, as the docker CLI does, so the exit cannot be missed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wr := b.cli.ContainerWait(wctx, resp.ID, client.ContainerWaitOptions{Condition: container.WaitConditionRemoved})
	if _, err := b.cli.ContainerStart(ctx, resp.ID, client.ContainerStartOptions{}); err != nil {
		cctx, ccancel := cleanupContext(ctx)
		defer ccancel()
		_, _ = b.cli.ContainerRemove(cctx, resp.ID, client.ContainerRemoveOptions{Force: true})
		return b.engineErr("baseline start", img, err)
	}
	select {
	case w := <-wr.Result:
		if w.StatusCode != 0 {
			return &sandbox.Error{Backend: Name, Op: "baseline", ID: img, Err: fmt.Errorf("`true` exited %d", w.StatusCode)}
		}
		return nil
	case err := <-wr.Error:
		return b.engineErr("baseline wait", img, err)
	}
}
