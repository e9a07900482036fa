// Test double of NCCL / RCCL: ncclGetVersion answers FAKE_NCCL_CODE.
__attribute__((visibility("default"))) int ncclGetVersion(int *v);

int ncclGetVersion(int *v) {
  *v = FAKE_NCCL_CODE;
  return 0;
}
