//go:build unix

package modal

// Images in the fake. ImageGetOrCreate answers with the image's id at once and with its build
// result only once the build has finished (api.proto, ImageGetOrCreateResponse: "result of
// build - only set if the image has finished building"); the SDK then follows the build on
// ImageJoinStreaming until a message carries a result (image.go, Build and
// waitForBuildIteration). So the first request for a recipe gets no result, as a first build
// on Modal does, and a later one for the same recipe gets the same id with its result.

import (
	"context"
	"fmt"
	"strings"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// imageBuild is one recipe's build: it finishes the first time a client follows it.
type imageBuild struct {
	tag    string
	result *pb.GenericResult
}

func (f *fakeModal) ImageGetOrCreate(ctx context.Context, req *pb.ImageGetOrCreateRequest) (*pb.ImageGetOrCreateResponse, error) {
	if !f.appExists(req.GetAppId()) {
		return nil, status.Error(codes.NotFound, "App not found")
	}
	if req.GetBuilderVersion() == "" {
		return nil, status.Error(codes.InvalidArgument, "builder_version is required")
	}
	if len(req.GetImage().GetSecretIds()) > 0 {
		return nil, status.Errorf(codes.NotFound, "Secret %s not found", req.GetImage().GetSecretIds()[0])
	}
	cmds := req.GetImage().GetDockerfileCommands()
	if len(cmds) == 0 || !strings.HasPrefix(cmds[0], "FROM ") {
		return nil, status.Error(codes.InvalidArgument, "the image needs a FROM command")
	}
	if len(cmds) > 1 || len(req.GetImage().GetBaseImages()) > 0 {
		return nil, status.Error(codes.Unimplemented, "the fake builds registry images only")
	}
	tag := strings.TrimPrefix(cmds[0], "FROM ")
	recipe := req.GetBuilderVersion() + "\n" + strings.Join(cmds, "\n")
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.recipes[recipe]; ok && !req.GetForceBuild() {
		return pb.ImageGetOrCreateResponse_builder{ImageId: id, Result: f.builds[id].result}.Build(), nil
	}
	id := randID("im-")
	f.recipes[recipe] = id
	f.builds[id] = &imageBuild{tag: tag}
	return pb.ImageGetOrCreateResponse_builder{ImageId: id}.Build(), nil
}

// finish ends the build of image id (a registry pull: the tag is known or it is not).
func (f *fakeModal) finish(id string) (*pb.GenericResult, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.builds[id]
	if !ok {
		return nil, false
	}
	if b.result == nil {
		if local, known := f.registry[b.tag]; known {
			f.images[id] = local
			b.result = pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}.Build()
		} else {
			b.result = pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_FAILURE,
				Exception: fmt.Sprintf("pull access denied for %s, repository does not exist", b.tag)}.Build()
		}
	}
	return b.result, true
}

// ImageJoinStreaming reports the build: a log entry the first time, then the result. Entries
// after last_entry_id only, as the SDK resumes with the last id it saw.
func (f *fakeModal) ImageJoinStreaming(req *pb.ImageJoinStreamingRequest, stream grpc.ServerStreamingServer[pb.ImageJoinStreamingResponse]) error {
	res, ok := f.finish(req.GetImageId())
	if !ok {
		return status.Errorf(codes.NotFound, "Image %s not found", req.GetImageId())
	}
	if req.GetLastEntryId() == "" {
		err := stream.Send(pb.ImageJoinStreamingResponse_builder{EntryId: "1", TaskLogs: []*pb.TaskLogs{
			pb.TaskLogs_builder{Data: "pulling the image\n", FileDescriptor: pb.FileDescriptor_FILE_DESCRIPTOR_INFO}.Build()}}.Build())
		if err != nil {
			return err
		}
	}
	return stream.Send(pb.ImageJoinStreamingResponse_builder{EntryId: "2", Result: res, Eof: true}.Build())
}

func (f *fakeModal) ImageFromId(ctx context.Context, req *pb.ImageFromIdRequest) (*pb.ImageFromIdResponse, error) {
	f.mu.Lock()
	_, ok := f.images[req.GetImageId()]
	f.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Image %s not found", req.GetImageId())
	}
	return pb.ImageFromIdResponse_builder{ImageId: req.GetImageId()}.Build(), nil
}

// ImageDelete forgets an image (api.proto ImageDelete; the SDK's Images.Delete maps NotFound
// to NotFoundError, so an unknown id is NotFound). Sandboxes already made from it run on.
func (f *fakeModal) ImageDelete(ctx context.Context, req *pb.ImageDeleteRequest) (*emptypb.Empty, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.images[req.GetImageId()]; !ok {
		return nil, status.Errorf(codes.NotFound, "Image %s not found", req.GetImageId())
	}
	delete(f.images, req.GetImageId())
	return &emptypb.Empty{}, nil
}
