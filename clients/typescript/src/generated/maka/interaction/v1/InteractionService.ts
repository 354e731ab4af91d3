// Original file: proto/maka/interaction/v1/interaction_service.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { AnswerRequest as _maka_interaction_v1_AnswerRequest, AnswerRequest__Output as _maka_interaction_v1_AnswerRequest__Output } from '../../../maka/interaction/v1/AnswerRequest';
import type { AnswerResponse as _maka_interaction_v1_AnswerResponse, AnswerResponse__Output as _maka_interaction_v1_AnswerResponse__Output } from '../../../maka/interaction/v1/AnswerResponse';
import type { AttachRequest as _maka_interaction_v1_AttachRequest, AttachRequest__Output as _maka_interaction_v1_AttachRequest__Output } from '../../../maka/interaction/v1/AttachRequest';
import type { AttachResponse as _maka_interaction_v1_AttachResponse, AttachResponse__Output as _maka_interaction_v1_AttachResponse__Output } from '../../../maka/interaction/v1/AttachResponse';
import type { GetInteractionRequest as _maka_interaction_v1_GetInteractionRequest, GetInteractionRequest__Output as _maka_interaction_v1_GetInteractionRequest__Output } from '../../../maka/interaction/v1/GetInteractionRequest';
import type { GetInteractionResponse as _maka_interaction_v1_GetInteractionResponse, GetInteractionResponse__Output as _maka_interaction_v1_GetInteractionResponse__Output } from '../../../maka/interaction/v1/GetInteractionResponse';
import type { HostLinkRequest as _maka_interaction_v1_HostLinkRequest, HostLinkRequest__Output as _maka_interaction_v1_HostLinkRequest__Output } from '../../../maka/interaction/v1/HostLinkRequest';
import type { HostLinkResponse as _maka_interaction_v1_HostLinkResponse, HostLinkResponse__Output as _maka_interaction_v1_HostLinkResponse__Output } from '../../../maka/interaction/v1/HostLinkResponse';
import type { ListHistoryRequest as _maka_interaction_v1_ListHistoryRequest, ListHistoryRequest__Output as _maka_interaction_v1_ListHistoryRequest__Output } from '../../../maka/interaction/v1/ListHistoryRequest';
import type { ListHistoryResponse as _maka_interaction_v1_ListHistoryResponse, ListHistoryResponse__Output as _maka_interaction_v1_ListHistoryResponse__Output } from '../../../maka/interaction/v1/ListHistoryResponse';
import type { ListHostsRequest as _maka_interaction_v1_ListHostsRequest, ListHostsRequest__Output as _maka_interaction_v1_ListHostsRequest__Output } from '../../../maka/interaction/v1/ListHostsRequest';
import type { ListHostsResponse as _maka_interaction_v1_ListHostsResponse, ListHostsResponse__Output as _maka_interaction_v1_ListHostsResponse__Output } from '../../../maka/interaction/v1/ListHostsResponse';
import type { ListPendingRequest as _maka_interaction_v1_ListPendingRequest, ListPendingRequest__Output as _maka_interaction_v1_ListPendingRequest__Output } from '../../../maka/interaction/v1/ListPendingRequest';
import type { ListPendingResponse as _maka_interaction_v1_ListPendingResponse, ListPendingResponse__Output as _maka_interaction_v1_ListPendingResponse__Output } from '../../../maka/interaction/v1/ListPendingResponse';
import type { ListSurfacesRequest as _maka_interaction_v1_ListSurfacesRequest, ListSurfacesRequest__Output as _maka_interaction_v1_ListSurfacesRequest__Output } from '../../../maka/interaction/v1/ListSurfacesRequest';
import type { ListSurfacesResponse as _maka_interaction_v1_ListSurfacesResponse, ListSurfacesResponse__Output as _maka_interaction_v1_ListSurfacesResponse__Output } from '../../../maka/interaction/v1/ListSurfacesResponse';

export interface InteractionServiceClient extends grpc.Client {
  Answer(argument: _maka_interaction_v1_AnswerRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_AnswerResponse__Output>): grpc.ClientUnaryCall;
  Answer(argument: _maka_interaction_v1_AnswerRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_AnswerResponse__Output>): grpc.ClientUnaryCall;
  Answer(argument: _maka_interaction_v1_AnswerRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_AnswerResponse__Output>): grpc.ClientUnaryCall;
  Answer(argument: _maka_interaction_v1_AnswerRequest, callback: grpc.requestCallback<_maka_interaction_v1_AnswerResponse__Output>): grpc.ClientUnaryCall;
  answer(argument: _maka_interaction_v1_AnswerRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_AnswerResponse__Output>): grpc.ClientUnaryCall;
  answer(argument: _maka_interaction_v1_AnswerRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_AnswerResponse__Output>): grpc.ClientUnaryCall;
  answer(argument: _maka_interaction_v1_AnswerRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_AnswerResponse__Output>): grpc.ClientUnaryCall;
  answer(argument: _maka_interaction_v1_AnswerRequest, callback: grpc.requestCallback<_maka_interaction_v1_AnswerResponse__Output>): grpc.ClientUnaryCall;
  
  Attach(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_interaction_v1_AttachRequest, _maka_interaction_v1_AttachResponse__Output>;
  Attach(options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_interaction_v1_AttachRequest, _maka_interaction_v1_AttachResponse__Output>;
  attach(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_interaction_v1_AttachRequest, _maka_interaction_v1_AttachResponse__Output>;
  attach(options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_interaction_v1_AttachRequest, _maka_interaction_v1_AttachResponse__Output>;
  
  GetInteraction(argument: _maka_interaction_v1_GetInteractionRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_GetInteractionResponse__Output>): grpc.ClientUnaryCall;
  GetInteraction(argument: _maka_interaction_v1_GetInteractionRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_GetInteractionResponse__Output>): grpc.ClientUnaryCall;
  GetInteraction(argument: _maka_interaction_v1_GetInteractionRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_GetInteractionResponse__Output>): grpc.ClientUnaryCall;
  GetInteraction(argument: _maka_interaction_v1_GetInteractionRequest, callback: grpc.requestCallback<_maka_interaction_v1_GetInteractionResponse__Output>): grpc.ClientUnaryCall;
  getInteraction(argument: _maka_interaction_v1_GetInteractionRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_GetInteractionResponse__Output>): grpc.ClientUnaryCall;
  getInteraction(argument: _maka_interaction_v1_GetInteractionRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_GetInteractionResponse__Output>): grpc.ClientUnaryCall;
  getInteraction(argument: _maka_interaction_v1_GetInteractionRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_GetInteractionResponse__Output>): grpc.ClientUnaryCall;
  getInteraction(argument: _maka_interaction_v1_GetInteractionRequest, callback: grpc.requestCallback<_maka_interaction_v1_GetInteractionResponse__Output>): grpc.ClientUnaryCall;
  
  HostLink(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_interaction_v1_HostLinkRequest, _maka_interaction_v1_HostLinkResponse__Output>;
  HostLink(options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_interaction_v1_HostLinkRequest, _maka_interaction_v1_HostLinkResponse__Output>;
  hostLink(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_interaction_v1_HostLinkRequest, _maka_interaction_v1_HostLinkResponse__Output>;
  hostLink(options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_interaction_v1_HostLinkRequest, _maka_interaction_v1_HostLinkResponse__Output>;
  
  ListHistory(argument: _maka_interaction_v1_ListHistoryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListHistoryResponse__Output>): grpc.ClientUnaryCall;
  ListHistory(argument: _maka_interaction_v1_ListHistoryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_ListHistoryResponse__Output>): grpc.ClientUnaryCall;
  ListHistory(argument: _maka_interaction_v1_ListHistoryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListHistoryResponse__Output>): grpc.ClientUnaryCall;
  ListHistory(argument: _maka_interaction_v1_ListHistoryRequest, callback: grpc.requestCallback<_maka_interaction_v1_ListHistoryResponse__Output>): grpc.ClientUnaryCall;
  listHistory(argument: _maka_interaction_v1_ListHistoryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListHistoryResponse__Output>): grpc.ClientUnaryCall;
  listHistory(argument: _maka_interaction_v1_ListHistoryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_ListHistoryResponse__Output>): grpc.ClientUnaryCall;
  listHistory(argument: _maka_interaction_v1_ListHistoryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListHistoryResponse__Output>): grpc.ClientUnaryCall;
  listHistory(argument: _maka_interaction_v1_ListHistoryRequest, callback: grpc.requestCallback<_maka_interaction_v1_ListHistoryResponse__Output>): grpc.ClientUnaryCall;
  
  ListHosts(argument: _maka_interaction_v1_ListHostsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListHostsResponse__Output>): grpc.ClientUnaryCall;
  ListHosts(argument: _maka_interaction_v1_ListHostsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_ListHostsResponse__Output>): grpc.ClientUnaryCall;
  ListHosts(argument: _maka_interaction_v1_ListHostsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListHostsResponse__Output>): grpc.ClientUnaryCall;
  ListHosts(argument: _maka_interaction_v1_ListHostsRequest, callback: grpc.requestCallback<_maka_interaction_v1_ListHostsResponse__Output>): grpc.ClientUnaryCall;
  listHosts(argument: _maka_interaction_v1_ListHostsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListHostsResponse__Output>): grpc.ClientUnaryCall;
  listHosts(argument: _maka_interaction_v1_ListHostsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_ListHostsResponse__Output>): grpc.ClientUnaryCall;
  listHosts(argument: _maka_interaction_v1_ListHostsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListHostsResponse__Output>): grpc.ClientUnaryCall;
  listHosts(argument: _maka_interaction_v1_ListHostsRequest, callback: grpc.requestCallback<_maka_interaction_v1_ListHostsResponse__Output>): grpc.ClientUnaryCall;
  
  ListPending(argument: _maka_interaction_v1_ListPendingRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListPendingResponse__Output>): grpc.ClientUnaryCall;
  ListPending(argument: _maka_interaction_v1_ListPendingRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_ListPendingResponse__Output>): grpc.ClientUnaryCall;
  ListPending(argument: _maka_interaction_v1_ListPendingRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListPendingResponse__Output>): grpc.ClientUnaryCall;
  ListPending(argument: _maka_interaction_v1_ListPendingRequest, callback: grpc.requestCallback<_maka_interaction_v1_ListPendingResponse__Output>): grpc.ClientUnaryCall;
  listPending(argument: _maka_interaction_v1_ListPendingRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListPendingResponse__Output>): grpc.ClientUnaryCall;
  listPending(argument: _maka_interaction_v1_ListPendingRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_ListPendingResponse__Output>): grpc.ClientUnaryCall;
  listPending(argument: _maka_interaction_v1_ListPendingRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListPendingResponse__Output>): grpc.ClientUnaryCall;
  listPending(argument: _maka_interaction_v1_ListPendingRequest, callback: grpc.requestCallback<_maka_interaction_v1_ListPendingResponse__Output>): grpc.ClientUnaryCall;
  
  ListSurfaces(argument: _maka_interaction_v1_ListSurfacesRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListSurfacesResponse__Output>): grpc.ClientUnaryCall;
  ListSurfaces(argument: _maka_interaction_v1_ListSurfacesRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_ListSurfacesResponse__Output>): grpc.ClientUnaryCall;
  ListSurfaces(argument: _maka_interaction_v1_ListSurfacesRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListSurfacesResponse__Output>): grpc.ClientUnaryCall;
  ListSurfaces(argument: _maka_interaction_v1_ListSurfacesRequest, callback: grpc.requestCallback<_maka_interaction_v1_ListSurfacesResponse__Output>): grpc.ClientUnaryCall;
  listSurfaces(argument: _maka_interaction_v1_ListSurfacesRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListSurfacesResponse__Output>): grpc.ClientUnaryCall;
  listSurfaces(argument: _maka_interaction_v1_ListSurfacesRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_interaction_v1_ListSurfacesResponse__Output>): grpc.ClientUnaryCall;
  listSurfaces(argument: _maka_interaction_v1_ListSurfacesRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_interaction_v1_ListSurfacesResponse__Output>): grpc.ClientUnaryCall;
  listSurfaces(argument: _maka_interaction_v1_ListSurfacesRequest, callback: grpc.requestCallback<_maka_interaction_v1_ListSurfacesResponse__Output>): grpc.ClientUnaryCall;
  
}

export interface InteractionServiceHandlers extends grpc.UntypedServiceImplementation {
  Answer: grpc.handleUnaryCall<_maka_interaction_v1_AnswerRequest__Output, _maka_interaction_v1_AnswerResponse>;
  
  Attach: grpc.handleBidiStreamingCall<_maka_interaction_v1_AttachRequest__Output, _maka_interaction_v1_AttachResponse>;
  
  GetInteraction: grpc.handleUnaryCall<_maka_interaction_v1_GetInteractionRequest__Output, _maka_interaction_v1_GetInteractionResponse>;
  
  HostLink: grpc.handleBidiStreamingCall<_maka_interaction_v1_HostLinkRequest__Output, _maka_interaction_v1_HostLinkResponse>;
  
  ListHistory: grpc.handleUnaryCall<_maka_interaction_v1_ListHistoryRequest__Output, _maka_interaction_v1_ListHistoryResponse>;
  
  ListHosts: grpc.handleUnaryCall<_maka_interaction_v1_ListHostsRequest__Output, _maka_interaction_v1_ListHostsResponse>;
  
  ListPending: grpc.handleUnaryCall<_maka_interaction_v1_ListPendingRequest__Output, _maka_interaction_v1_ListPendingResponse>;
  
  ListSurfaces: grpc.handleUnaryCall<_maka_interaction_v1_ListSurfacesRequest__Output, _maka_interaction_v1_ListSurfacesResponse>;
  
}

export interface InteractionServiceDefinition extends grpc.ServiceDefinition {
  Answer: MethodDefinition<_maka_interaction_v1_AnswerRequest, _maka_interaction_v1_AnswerResponse, _maka_interaction_v1_AnswerRequest__Output, _maka_interaction_v1_AnswerResponse__Output>
  Attach: MethodDefinition<_maka_interaction_v1_AttachRequest, _maka_interaction_v1_AttachResponse, _maka_interaction_v1_AttachRequest__Output, _maka_interaction_v1_AttachResponse__Output>
  GetInteraction: MethodDefinition<_maka_interaction_v1_GetInteractionRequest, _maka_interaction_v1_GetInteractionResponse, _maka_interaction_v1_GetInteractionRequest__Output, _maka_interaction_v1_GetInteractionResponse__Output>
  HostLink: MethodDefinition<_maka_interaction_v1_HostLinkRequest, _maka_interaction_v1_HostLinkResponse, _maka_interaction_v1_HostLinkRequest__Output, _maka_interaction_v1_HostLinkResponse__Output>
  ListHistory: MethodDefinition<_maka_interaction_v1_ListHistoryRequest, _maka_interaction_v1_ListHistoryResponse, _maka_interaction_v1_ListHistoryRequest__Output, _maka_interaction_v1_ListHistoryResponse__Output>
  ListHosts: MethodDefinition<_maka_interaction_v1_ListHostsRequest, _maka_interaction_v1_ListHostsResponse, _maka_interaction_v1_ListHostsRequest__Output, _maka_interaction_v1_ListHostsResponse__Output>
  ListPending: MethodDefinition<_maka_interaction_v1_ListPendingRequest, _maka_interaction_v1_ListPendingResponse, _maka_interaction_v1_ListPendingRequest__Output, _maka_interaction_v1_ListPendingResponse__Output>
  ListSurfaces: MethodDefinition<_maka_interaction_v1_ListSurfacesRequest, _maka_interaction_v1_ListSurfacesResponse, _maka_interaction_v1_ListSurfacesRequest__Output, _maka_interaction_v1_ListSurfacesResponse__Output>
}
