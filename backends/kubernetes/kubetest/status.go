package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const deadlineMessage = "Pod was active on the node longer than the specified deadline"

// status computes the pod's status from its container, as the kubelet's status manager does.
// deadline reports that spec.activeDeadlineSeconds has just run out: the caller kills the
// container and asks again.
func (n *Node) status(ctx context.Context, pod *corev1.Pod, st *podState) (status corev1.PodStatus, deadline bool) {
	status = *pod.Status.DeepCopy()
	n.mu.Lock()
	s := *st
	n.mu.Unlock()

	status.HostIP = "127.0.0.1"
	status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	if status.StartTime == nil {
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		status.StartTime = &now
	}
	setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue})

	first := corev1.ContainerStatus{Name: s.container, Image: pod.Spec.Containers[0].Image}
	switch {
	case s.killed:
		status.Phase = corev1.PodFailed
		status.Reason = "Evicted"
		status.Message = fmt.Sprintf("The node was low on resource: memory. Container %s was using more than the node could give it.", s.container)
		first.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", StartedAt: s.started,
			FinishedAt: metav1.NewTime(time.Now().Truncate(time.Second)), ContainerID: dockerID(s.containerID)}
		if old := oldContainerStatus(pod, s.container); old != nil && old.State.Terminated != nil {
			first.State.Terminated = old.State.Terminated
		}
		setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: status.Message})
	case s.containerID == "":
		status.Phase = corev1.PodPending
		if s.waiting != nil {
			first.State.Waiting = s.waiting.DeepCopy()
		} else {
			first.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		}
	default:
		first.ContainerID, first.ImageID = dockerID(s.containerID), s.imageID
		ins, err := n.docker.ContainerInspect(ctx, s.containerID, client.ContainerInspectOptions{})
		switch {
		case err != nil && cerrdefs.IsNotFound(err):
			status.Phase = corev1.PodFailed
			first.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
				Message: "The container could not be located when the pod was terminated", ContainerID: first.ContainerID}
		case err != nil:
			return *pod.Status.DeepCopy(), false // try again later
		case ins.Container.State.Running:
			status.Phase = corev1.PodRunning
			first.Ready, first.Started = true, ptr(true)
			first.State.Running = &corev1.ContainerStateRunning{StartedAt: s.started}
		default:
			cs := ins.Container.State
			term := &corev1.ContainerStateTerminated{ExitCode: int32(cs.ExitCode), Reason: "Completed", StartedAt: s.started, ContainerID: first.ContainerID}
			if t, err := time.Parse(time.RFC3339Nano, cs.FinishedAt); err == nil {
				term.FinishedAt = metav1.NewTime(t.Truncate(time.Second))
			}
			switch {
			case cs.OOMKilled:
				term.Reason = "OOMKilled"
			case cs.ExitCode != 0:
				term.Reason = "Error"
			}
			first.State.Terminated, first.Started = term, ptr(false)
			// Restarts are not emulated: whatever the restartPolicy, the pod ends here.
			status.Phase = corev1.PodSucceeded
			if cs.ExitCode != 0 {
				status.Phase = corev1.PodFailed
			}
		}
	}
	if s.deadline {
		status.Phase, status.Reason, status.Message = corev1.PodFailed, "DeadlineExceeded", deadlineMessage
	} else if status.Phase == corev1.PodRunning && pod.Spec.ActiveDeadlineSeconds != nil &&
		time.Since(status.StartTime.Time) >= time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second {
		n.mu.Lock()
		st.deadline = true
		n.mu.Unlock()
		return status, true
	}

	statuses := []corev1.ContainerStatus{first}
	for _, c := range pod.Spec.Containers[1:] {
		statuses = append(statuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: "kubetest runs only a pod's first container"}}})
	}
	for i := range statuses {
		if old := oldContainerStatus(pod, statuses[i].Name); old != nil {
			statuses[i].RestartCount = old.RestartCount
		}
	}
	status.ContainerStatuses = statuses

	ready := status.Phase == corev1.PodRunning && len(pod.Spec.Containers) == 1
	terminal := status.Phase == corev1.PodSucceeded || status.Phase == corev1.PodFailed
	switch {
	case ready:
		setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
		setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	case terminal:
		setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodCompleted"})
		setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted"})
	default:
		msg := fmt.Sprintf("containers with unready status: [%s]", s.container)
		setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: msg})
		setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: msg})
	}
	sandboxReady := corev1.ConditionTrue
	if terminal {
		sandboxReady = corev1.ConditionFalse
	}
	setCondition(&status.Conditions, corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: sandboxReady})

	if s.containerID != "" && s.ip != "" {
		status.PodIP = s.ip
		status.PodIPs = []corev1.PodIP{{IP: s.ip}}
	}
	return status, false
}

func oldContainerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func dockerID(id string) string {
	if id == "" {
		return ""
	}
	return "docker://" + id
}

func ptr[T any](v T) *T { return &v }

// statusEqual compares statuses as the apiserver stores them (times to the second).
func statusEqual(a, b corev1.PodStatus) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
