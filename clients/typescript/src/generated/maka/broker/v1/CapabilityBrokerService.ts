// Original file: proto/maka/broker/v1/broker.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { CallToolRequest as _maka_broker_v1_CallToolRequest, CallToolRequest__Output as _maka_broker_v1_CallToolRequest__Output } from '../../../maka/broker/v1/CallToolRequest';
import type { CallToolResponse as _maka_broker_v1_CallToolResponse, CallToolResponse__Output as _maka_broker_v1_CallToolResponse__Output } from '../../../maka/broker/v1/CallToolResponse';
import type { CompleteSignInRequest as _maka_broker_v1_CompleteSignInRequest, CompleteSignInRequest__Output as _maka_broker_v1_CompleteSignInRequest__Output } from '../../../maka/broker/v1/CompleteSignInRequest';
import type { CompleteSignInResponse as _maka_broker_v1_CompleteSignInResponse, CompleteSignInResponse__Output as _maka_broker_v1_CompleteSignInResponse__Output } from '../../../maka/broker/v1/CompleteSignInResponse';
import type { ConnectRequest as _maka_broker_v1_ConnectRequest, ConnectRequest__Output as _maka_broker_v1_ConnectRequest__Output } from '../../../maka/broker/v1/ConnectRequest';
import type { ConnectResponse as _maka_broker_v1_ConnectResponse, ConnectResponse__Output as _maka_broker_v1_ConnectResponse__Output } from '../../../maka/broker/v1/ConnectResponse';
import type { GetStatusRequest as _maka_broker_v1_GetStatusRequest, GetStatusRequest__Output as _maka_broker_v1_GetStatusRequest__Output } from '../../../maka/broker/v1/GetStatusRequest';
import type { GetStatusResponse as _maka_broker_v1_GetStatusResponse, GetStatusResponse__Output as _maka_broker_v1_GetStatusResponse__Output } from '../../../maka/broker/v1/GetStatusResponse';
import type { ListSignInsRequest as _maka_broker_v1_ListSignInsRequest, ListSignInsRequest__Output as _maka_broker_v1_ListSignInsRequest__Output } from '../../../maka/broker/v1/ListSignInsRequest';
import type { ListSignInsResponse as _maka_broker_v1_ListSignInsResponse, ListSignInsResponse__Output as _maka_broker_v1_ListSignInsResponse__Output } from '../../../maka/broker/v1/ListSignInsResponse';
import type { ListToolsRequest as _maka_broker_v1_ListToolsRequest, ListToolsRequest__Output as _maka_broker_v1_ListToolsRequest__Output } from '../../../maka/broker/v1/ListToolsRequest';
import type { ListToolsResponse as _maka_broker_v1_ListToolsResponse, ListToolsResponse__Output as _maka_broker_v1_ListToolsResponse__Output } from '../../../maka/broker/v1/ListToolsResponse';
import type { ReportServersRequest as _maka_broker_v1_ReportServersRequest, ReportServersRequest__Output as _maka_broker_v1_ReportServersRequest__Output } from '../../../maka/broker/v1/ReportServersRequest';
import type { ReportServersResponse as _maka_broker_v1_ReportServersResponse, ReportServersResponse__Output as _maka_broker_v1_ReportServersResponse__Output } from '../../../maka/broker/v1/ReportServersResponse';
import type { SignOutRequest as _maka_broker_v1_SignOutRequest, SignOutRequest__Output as _maka_broker_v1_SignOutRequest__Output } from '../../../maka/broker/v1/SignOutRequest';
import type { SignOutResponse as _maka_broker_v1_SignOutResponse, SignOutResponse__Output as _maka_broker_v1_SignOutResponse__Output } from '../../../maka/broker/v1/SignOutResponse';
import type { StopRequest as _maka_broker_v1_StopRequest, StopRequest__Output as _maka_broker_v1_StopRequest__Output } from '../../../maka/broker/v1/StopRequest';
import type { StopResponse as _maka_broker_v1_StopResponse, StopResponse__Output as _maka_broker_v1_StopResponse__Output } from '../../../maka/broker/v1/StopResponse';
import type { WatchCallRequest as _maka_broker_v1_WatchCallRequest, WatchCallRequest__Output as _maka_broker_v1_WatchCallRequest__Output } from '../../../maka/broker/v1/WatchCallRequest';
import type { WatchCallResponse as _maka_broker_v1_WatchCallResponse, WatchCallResponse__Output as _maka_broker_v1_WatchCallResponse__Output } from '../../../maka/broker/v1/WatchCallResponse';
import type { WatchToolsRequest as _maka_broker_v1_WatchToolsRequest, WatchToolsRequest__Output as _maka_broker_v1_WatchToolsRequest__Output } from '../../../maka/broker/v1/WatchToolsRequest';
import type { WatchToolsResponse as _maka_broker_v1_WatchToolsResponse, WatchToolsResponse__Output as _maka_broker_v1_WatchToolsResponse__Output } from '../../../maka/broker/v1/WatchToolsResponse';

export interface CapabilityBrokerServiceClient extends grpc.Client {
  CallTool(argument: _maka_broker_v1_CallToolRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_CallToolResponse__Output>;
  CallTool(argument: _maka_broker_v1_CallToolRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_CallToolResponse__Output>;
  callTool(argument: _maka_broker_v1_CallToolRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_CallToolResponse__Output>;
  callTool(argument: _maka_broker_v1_CallToolRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_CallToolResponse__Output>;
  
  CompleteSignIn(argument: _maka_broker_v1_CompleteSignInRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_CompleteSignInResponse__Output>): grpc.ClientUnaryCall;
  CompleteSignIn(argument: _maka_broker_v1_CompleteSignInRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_CompleteSignInResponse__Output>): grpc.ClientUnaryCall;
  CompleteSignIn(argument: _maka_broker_v1_CompleteSignInRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_CompleteSignInResponse__Output>): grpc.ClientUnaryCall;
  CompleteSignIn(argument: _maka_broker_v1_CompleteSignInRequest, callback: grpc.requestCallback<_maka_broker_v1_CompleteSignInResponse__Output>): grpc.ClientUnaryCall;
  completeSignIn(argument: _maka_broker_v1_CompleteSignInRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_CompleteSignInResponse__Output>): grpc.ClientUnaryCall;
  completeSignIn(argument: _maka_broker_v1_CompleteSignInRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_CompleteSignInResponse__Output>): grpc.ClientUnaryCall;
  completeSignIn(argument: _maka_broker_v1_CompleteSignInRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_CompleteSignInResponse__Output>): grpc.ClientUnaryCall;
  completeSignIn(argument: _maka_broker_v1_CompleteSignInRequest, callback: grpc.requestCallback<_maka_broker_v1_CompleteSignInResponse__Output>): grpc.ClientUnaryCall;
  
  Connect(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_broker_v1_ConnectRequest, _maka_broker_v1_ConnectResponse__Output>;
  Connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_broker_v1_ConnectRequest, _maka_broker_v1_ConnectResponse__Output>;
  connect(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_broker_v1_ConnectRequest, _maka_broker_v1_ConnectResponse__Output>;
  connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<_maka_broker_v1_ConnectRequest, _maka_broker_v1_ConnectResponse__Output>;
  
  GetStatus(argument: _maka_broker_v1_GetStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  GetStatus(argument: _maka_broker_v1_GetStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  GetStatus(argument: _maka_broker_v1_GetStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  GetStatus(argument: _maka_broker_v1_GetStatusRequest, callback: grpc.requestCallback<_maka_broker_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _maka_broker_v1_GetStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _maka_broker_v1_GetStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _maka_broker_v1_GetStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _maka_broker_v1_GetStatusRequest, callback: grpc.requestCallback<_maka_broker_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  
  ListSignIns(argument: _maka_broker_v1_ListSignInsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ListSignInsResponse__Output>): grpc.ClientUnaryCall;
  ListSignIns(argument: _maka_broker_v1_ListSignInsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_ListSignInsResponse__Output>): grpc.ClientUnaryCall;
  ListSignIns(argument: _maka_broker_v1_ListSignInsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ListSignInsResponse__Output>): grpc.ClientUnaryCall;
  ListSignIns(argument: _maka_broker_v1_ListSignInsRequest, callback: grpc.requestCallback<_maka_broker_v1_ListSignInsResponse__Output>): grpc.ClientUnaryCall;
  listSignIns(argument: _maka_broker_v1_ListSignInsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ListSignInsResponse__Output>): grpc.ClientUnaryCall;
  listSignIns(argument: _maka_broker_v1_ListSignInsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_ListSignInsResponse__Output>): grpc.ClientUnaryCall;
  listSignIns(argument: _maka_broker_v1_ListSignInsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ListSignInsResponse__Output>): grpc.ClientUnaryCall;
  listSignIns(argument: _maka_broker_v1_ListSignInsRequest, callback: grpc.requestCallback<_maka_broker_v1_ListSignInsResponse__Output>): grpc.ClientUnaryCall;
  
  ListTools(argument: _maka_broker_v1_ListToolsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ListToolsResponse__Output>): grpc.ClientUnaryCall;
  ListTools(argument: _maka_broker_v1_ListToolsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_ListToolsResponse__Output>): grpc.ClientUnaryCall;
  ListTools(argument: _maka_broker_v1_ListToolsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ListToolsResponse__Output>): grpc.ClientUnaryCall;
  ListTools(argument: _maka_broker_v1_ListToolsRequest, callback: grpc.requestCallback<_maka_broker_v1_ListToolsResponse__Output>): grpc.ClientUnaryCall;
  listTools(argument: _maka_broker_v1_ListToolsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ListToolsResponse__Output>): grpc.ClientUnaryCall;
  listTools(argument: _maka_broker_v1_ListToolsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_ListToolsResponse__Output>): grpc.ClientUnaryCall;
  listTools(argument: _maka_broker_v1_ListToolsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ListToolsResponse__Output>): grpc.ClientUnaryCall;
  listTools(argument: _maka_broker_v1_ListToolsRequest, callback: grpc.requestCallback<_maka_broker_v1_ListToolsResponse__Output>): grpc.ClientUnaryCall;
  
  ReportServers(metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ReportServersResponse__Output>): grpc.ClientWritableStream<_maka_broker_v1_ReportServersRequest>;
  ReportServers(metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_ReportServersResponse__Output>): grpc.ClientWritableStream<_maka_broker_v1_ReportServersRequest>;
  ReportServers(options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ReportServersResponse__Output>): grpc.ClientWritableStream<_maka_broker_v1_ReportServersRequest>;
  ReportServers(callback: grpc.requestCallback<_maka_broker_v1_ReportServersResponse__Output>): grpc.ClientWritableStream<_maka_broker_v1_ReportServersRequest>;
  reportServers(metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ReportServersResponse__Output>): grpc.ClientWritableStream<_maka_broker_v1_ReportServersRequest>;
  reportServers(metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_ReportServersResponse__Output>): grpc.ClientWritableStream<_maka_broker_v1_ReportServersRequest>;
  reportServers(options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_ReportServersResponse__Output>): grpc.ClientWritableStream<_maka_broker_v1_ReportServersRequest>;
  reportServers(callback: grpc.requestCallback<_maka_broker_v1_ReportServersResponse__Output>): grpc.ClientWritableStream<_maka_broker_v1_ReportServersRequest>;
  
  SignOut(argument: _maka_broker_v1_SignOutRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_SignOutResponse__Output>): grpc.ClientUnaryCall;
  SignOut(argument: _maka_broker_v1_SignOutRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_SignOutResponse__Output>): grpc.ClientUnaryCall;
  SignOut(argument: _maka_broker_v1_SignOutRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_SignOutResponse__Output>): grpc.ClientUnaryCall;
  SignOut(argument: _maka_broker_v1_SignOutRequest, callback: grpc.requestCallback<_maka_broker_v1_SignOutResponse__Output>): grpc.ClientUnaryCall;
  signOut(argument: _maka_broker_v1_SignOutRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_SignOutResponse__Output>): grpc.ClientUnaryCall;
  signOut(argument: _maka_broker_v1_SignOutRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_SignOutResponse__Output>): grpc.ClientUnaryCall;
  signOut(argument: _maka_broker_v1_SignOutRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_SignOutResponse__Output>): grpc.ClientUnaryCall;
  signOut(argument: _maka_broker_v1_SignOutRequest, callback: grpc.requestCallback<_maka_broker_v1_SignOutResponse__Output>): grpc.ClientUnaryCall;
  
  Stop(argument: _maka_broker_v1_StopRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_StopResponse__Output>): grpc.ClientUnaryCall;
  Stop(argument: _maka_broker_v1_StopRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_StopResponse__Output>): grpc.ClientUnaryCall;
  Stop(argument: _maka_broker_v1_StopRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_StopResponse__Output>): grpc.ClientUnaryCall;
  Stop(argument: _maka_broker_v1_StopRequest, callback: grpc.requestCallback<_maka_broker_v1_StopResponse__Output>): grpc.ClientUnaryCall;
  stop(argument: _maka_broker_v1_StopRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_StopResponse__Output>): grpc.ClientUnaryCall;
  stop(argument: _maka_broker_v1_StopRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_maka_broker_v1_StopResponse__Output>): grpc.ClientUnaryCall;
  stop(argument: _maka_broker_v1_StopRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_maka_broker_v1_StopResponse__Output>): grpc.ClientUnaryCall;
  stop(argument: _maka_broker_v1_StopRequest, callback: grpc.requestCallback<_maka_broker_v1_StopResponse__Output>): grpc.ClientUnaryCall;
  
  WatchCall(argument: _maka_broker_v1_WatchCallRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_WatchCallResponse__Output>;
  WatchCall(argument: _maka_broker_v1_WatchCallRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_WatchCallResponse__Output>;
  watchCall(argument: _maka_broker_v1_WatchCallRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_WatchCallResponse__Output>;
  watchCall(argument: _maka_broker_v1_WatchCallRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_WatchCallResponse__Output>;
  
  WatchTools(argument: _maka_broker_v1_WatchToolsRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_WatchToolsResponse__Output>;
  WatchTools(argument: _maka_broker_v1_WatchToolsRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_WatchToolsResponse__Output>;
  watchTools(argument: _maka_broker_v1_WatchToolsRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_WatchToolsResponse__Output>;
  watchTools(argument: _maka_broker_v1_WatchToolsRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_maka_broker_v1_WatchToolsResponse__Output>;
  
}

export interface CapabilityBrokerServiceHandlers extends grpc.UntypedServiceImplementation {
  CallTool: grpc.handleServerStreamingCall<_maka_broker_v1_CallToolRequest__Output, _maka_broker_v1_CallToolResponse>;
  
  CompleteSignIn: grpc.handleUnaryCall<_maka_broker_v1_CompleteSignInRequest__Output, _maka_broker_v1_CompleteSignInResponse>;
  
  Connect: grpc.handleBidiStreamingCall<_maka_broker_v1_ConnectRequest__Output, _maka_broker_v1_ConnectResponse>;
  
  GetStatus: grpc.handleUnaryCall<_maka_broker_v1_GetStatusRequest__Output, _maka_broker_v1_GetStatusResponse>;
  
  ListSignIns: grpc.handleUnaryCall<_maka_broker_v1_ListSignInsRequest__Output, _maka_broker_v1_ListSignInsResponse>;
  
  ListTools: grpc.handleUnaryCall<_maka_broker_v1_ListToolsRequest__Output, _maka_broker_v1_ListToolsResponse>;
  
  ReportServers: grpc.handleClientStreamingCall<_maka_broker_v1_ReportServersRequest__Output, _maka_broker_v1_ReportServersResponse>;
  
  SignOut: grpc.handleUnaryCall<_maka_broker_v1_SignOutRequest__Output, _maka_broker_v1_SignOutResponse>;
  
  Stop: grpc.handleUnaryCall<_maka_broker_v1_StopRequest__Output, _maka_broker_v1_StopResponse>;
  
  WatchCall: grpc.handleServerStreamingCall<_maka_broker_v1_WatchCallRequest__Output, _maka_broker_v1_WatchCallResponse>;
  
  WatchTools: grpc.handleServerStreamingCall<_maka_broker_v1_WatchToolsRequest__Output, _maka_broker_v1_WatchToolsResponse>;
  
}

export interface CapabilityBrokerServiceDefinition extends grpc.ServiceDefinition {
  CallTool: MethodDefinition<_maka_broker_v1_CallToolRequest, _maka_broker_v1_CallToolResponse, _maka_broker_v1_CallToolRequest__Output, _maka_broker_v1_CallToolResponse__Output>
  CompleteSignIn: MethodDefinition<_maka_broker_v1_CompleteSignInRequest, _maka_broker_v1_CompleteSignInResponse, _maka_broker_v1_CompleteSignInRequest__Output, _maka_broker_v1_CompleteSignInResponse__Output>
  Connect: MethodDefinition<_maka_broker_v1_ConnectRequest, _maka_broker_v1_ConnectResponse, _maka_broker_v1_ConnectRequest__Output, _maka_broker_v1_ConnectResponse__Output>
  GetStatus: MethodDefinition<_maka_broker_v1_GetStatusRequest, _maka_broker_v1_GetStatusResponse, _maka_broker_v1_GetStatusRequest__Output, _maka_broker_v1_GetStatusResponse__Output>
  ListSignIns: MethodDefinition<_maka_broker_v1_ListSignInsRequest, _maka_broker_v1_ListSignInsResponse, _maka_broker_v1_ListSignInsRequest__Output, _maka_broker_v1_ListSignInsResponse__Output>
  ListTools: MethodDefinition<_maka_broker_v1_ListToolsRequest, _maka_broker_v1_ListToolsResponse, _maka_broker_v1_ListToolsRequest__Output, _maka_broker_v1_ListToolsResponse__Output>
  ReportServers: MethodDefinition<_maka_broker_v1_ReportServersRequest, _maka_broker_v1_ReportServersResponse, _maka_broker_v1_ReportServersRequest__Output, _maka_broker_v1_ReportServersResponse__Output>
  SignOut: MethodDefinition<_maka_broker_v1_SignOutRequest, _maka_broker_v1_SignOutResponse, _maka_broker_v1_SignOutRequest__Output, _maka_broker_v1_SignOutResponse__Output>
  Stop: MethodDefinition<_maka_broker_v1_StopRequest, _maka_broker_v1_StopResponse, _maka_broker_v1_StopRequest__Output, _maka_broker_v1_StopResponse__Output>
  WatchCall: MethodDefinition<_maka_broker_v1_WatchCallRequest, _maka_broker_v1_WatchCallResponse, _maka_broker_v1_WatchCallRequest__Output, _maka_broker_v1_WatchCallResponse__Output>
  WatchTools: MethodDefinition<_maka_broker_v1_WatchToolsRequest, _maka_broker_v1_WatchToolsResponse, _maka_broker_v1_WatchToolsRequest__Output, _maka_broker_v1_WatchToolsResponse__Output>
}
