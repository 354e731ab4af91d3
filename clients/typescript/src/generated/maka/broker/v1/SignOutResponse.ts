// Original file: proto/maka/broker/v1/broker.proto


export interface SignOutResponse {
}

export interface SignOutResponse__Output {
}
