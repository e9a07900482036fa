#!/usr/bin/env python3
"""Generates a large synthetic PyTorch profiler (Kineto) Chrome trace for the trace benchmark.

Usage: gentrace.py OUT [--mb SIZE] [--gzip] [--seed N] [--vendor nvidia|amd|mixed]
                       [--layers N] [--rank R] [--world-size W] [--no-memory]

Writes OUT (gzip-compressed when OUT ends in .gz) of about SIZE MiB of uncompressed JSON
(default 300); with --gzip, OUT plain and OUT.gz with the same bytes compressed (gzip level 9,
what torch.profiler writes for a .json.gz), in one pass. Prints one line on standard output:
    BYTES EVENTS GPU_OPS LAUNCHES STEPS
(uncompressed bytes, traceEvents entries, GPU ops = kernel/gpu_memcpy/gpu_memset events,
runtime launch events that have a correlation, ProfilerStep#N events), and a summary on stderr.
Deterministic: the same arguments give the same bytes.

The trace imitates what torch.profiler (Kineto) writes for one rank of a data-parallel
transformer training run (with record_shapes and with_stack):
  - Kineto's layout: one field group per line, 2-space indents, ts/dur in microseconds with
    three decimals (nanoseconds), the top-level keys schemaVersion, deviceProperties,
    distributedInfo {backend "nccl", rank, world_size, pg_config...}, record_shapes,
    traceEvents, then traceName, displayTimeUnit, baseTimeNanoseconds after the events.
  - Events out of time order across categories, as Kineto writes them: every CPU-side event of
    the whole trace first (ProfilerStep#N user_annotation, the dataloader annotation, cpu_op
    stacks with External id / Record function id / Input Dims..., python_function frames), then
    the allocator's [memory] instant events (profile_memory=True: Addr, Bytes, Total Allocated,
    Total Reserved, Device Type, Device Id; each forward op's output saved for backward, GEMM
    and layer-norm workspaces, backward's gradients freeing the activations, optimizer
    temporaries, a host allocation of .item(); addresses reused by size, as a caching allocator
    does; --no-memory leaves them out), then the CUPTI buffers: cuda_runtime launches
    (cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync, cudaMemsetAsync,
    cudaStreamSynchronize, cudaEventRecord...) with
    args.correlation, each followed by its ac2g flow start (ph "s", id = correlation), and the
    GPU ops (cat kernel / gpu_memcpy / gpu_memset) with their ac2g flow end (ph "f", bp "e"),
    gpu_user_annotation ProfilerStep#N, then the process/thread metadata (ph "M"), the Trace
    span and the "Record Window End" instant.
  - Per step: dataloader wait, Memcpy HtoD (Pageable -> Device) of the batch, forward and
    backward of every layer (GEMMs, flash attention, layer norm, elementwise), backward on the
    autograd thread with DDP bucket all-reduces (ncclDevKernel_AllReduce_Sum_bf16_RING_LL...
    on their own stream, with "Collective name", "In msg nelems", "Out msg nelems",
    "Group size", "dtype", "Process Group Name"), overlapping the compute stream; memsets in
    the attention backward; the fused Adam step (multi_tensor_apply_kernel); loss.item()
    (Memcpy DtoH + cudaStreamSynchronize) that keeps the CPU and the GPU in step.
  - --vendor nvidia: CUDA names, compute stream 7 (sm90_xmma_gemm..., nvjet_..., cutlass,
    flash::flash_fwd_kernel...); amd: HIP launch names, default stream 0, Cijk_... GEMMs,
    ck_tile attention, "AMD Instinct MI300X" with warpSize 64; mixed (the default): the
    NVIDIA layout, kernel names drawn from both vendors' pools (the name table holds both
    styles, as a reader sees across a fleet).
"""
import argparse
import gzip
import random
import re
import sys

T0_NS = 1365627862757064  # ts origin, in ns (the order of magnitude Kineto writes, in us)
PID = 2871365
MAIN_TID = 2871365
BWD_TID = 2871642  # the autograd engine's thread

# ---------------------------------------------------------------- kernel name pools
EW_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add"
          "<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add"
          "<c10::BFloat16>, std::array<char*, 3ul>)")
EW_GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl("
           "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::"
           "{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >"
           "(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
           "::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
           "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)")
EW_GELU_BWD = ("void at::native::vectorized_elementwise_kernel<4, at::native::"
               "GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
               "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
               "{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, "
               "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
               "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::"
               "operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, "
               "std::array<char*, 3ul>)")
EW_ACC = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
          " std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, "
          "std::array<char*, 3ul>)")
EW_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
           "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
LN_FWD = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, "
          "float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, "
          "float*, float*, c10::BFloat16*)")
LN_BWD_IN = ("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized"
             "<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, "
             "float const*, c10::BFloat16 const*, c10::BFloat16*, int)")
LN_BWD_GB = ("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32"
             "<c10::BFloat16, float>(long, long, c10::BFloat16 const*, c10::BFloat16 const*, "
             "float const*, float const*, c10::BFloat16*, c10::BFloat16*)")
SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float,"
           " float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, "
           "c10::BFloat16 const*, int)")
NLL = ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, "
       "float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, "
       "long, long)")
SOFTMAX_BWD = ("void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, c10::BFloat16, "
               "float, float, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>"
               "(c10::BFloat16*, float const*, float const*, long)")
ADAM = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
        "(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::"
        "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, "
        "double, double, double, double, bool, double*, double*>(at::native::(anonymous "
        "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::"
        "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, "
        "double, double, double, double, bool, double*, double*)")
NORM = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
        "(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::"
        "LpNormFunctor<float, 2, float, float>, float*, int>(at::native::(anonymous namespace)::"
        "TensorListMetadata<1>, at::native::(anonymous namespace)::LpNormFunctor<float, 2, "
        "float, float>, float*, int)")
NORM_CLEANUP = ("void at::native::(anonymous namespace)::lpnorm_cleanup<float, 2, float, float>"
                "(float const*, at::native::(anonymous namespace)::TensorListAddresses, int)")

NV_GEMM = [
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas",
    "nvjet_tst_256x128_64x4_2x1_v_bz_coopA_TNT",
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopB_NNT",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn",
]
AMD_GEMM = [
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_"
    "AFEM1_ASEM1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_IU1_K1_LBSPPA2048_"
    "LBSPPB2048_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV1_MIWT8_8_MO40_NTn1_NTA0_NTB0_NTC0_"
    "NTD0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW8_TLDS1_ULSGRO0_"
    "USL1_UIOFGRO0_USFGROn1_VSn1_VWA8_VWB1_WSGRA0_WSGRB0_WS64_WG32_8_1_WGM8",
    "Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x256x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_"
    "AFEM1_ASEM1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_IU1_K1_LBSPPA1024_"
    "LBSPPB2048_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV1_MIWT4_8_MO40_NTn1_NTA0_NTB0_NTC0_"
    "NTD0_NEPBS0_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW8_TLDS1_ULSGRO0_"
    "USL1_UIOFGRO0_USFGROn1_VSn1_VWA8_VWB8_WSGRA0_WSGRB0_WS64_WG32_8_1_WGM8",
    "_ZN2ck27kernel_gemm_xdl_cshuffle_v3INS_28GridwiseGemm_xdl_cshuffle_v3INS_13tensor_layout4gemm"
    "8RowMajorENS3_11ColumnMajorES4_DF16bS6_fS6_NS_5TupleIJEEES6_NS_16tensor_operation12element_"
    "wise11PassThroughESB_SB_LNS9_6device18GemmSpecializationE0ELi256ELi256ELi256ELi64ELi8ELi8E"
    "Li16ELi16ELi8ELi8EEELb1ELNS_25InMemoryDataOperationEnumE0ELi1ELNS_10TailNumberE0EEEvNT_"
    "8ArgumentE",
]
NV_FLASH_FWD = ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, "
                "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, "
                "cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>"
                "(flash::Flash_fwd_params)")
NV_FLASH_BWD = ("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits"
                "<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits"
                "<128, 64, 128, 8, cutlass::bfloat16_t> >, false, true, false, false, false, true,"
                " false, false>(flash::Flash_bwd_params)")
NV_FLASH_CVT = ("void flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, "
                "2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, "
                "cutlass::bfloat16_t> >, true>(flash::Flash_bwd_params, int)")
AMD_FLASH_FWD = ("void ck_tile::kentry<256, 2, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipeline"
                 "QRKSVSAsync<ck_tile::BlockFmhaPipelineProblem<ck_tile::bf16_t, ck_tile::bf16_t,"
                 " ck_tile::bf16_t, float, float, ck_tile::bf16_t, unsigned short, float, "
                 "ck_tile::bf16_t, float, ck_tile::bf16_t, ck_tile::TileFmhaShape<ck_tile::"
                 "sequence<128, 128, 32, 128, 32, 128>, ck_tile::sequence<4, 1, 1>, ck_tile::"
                 "sequence<32, 32, 16>, ck_tile::sequence<4, 1, 1>, ck_tile::sequence<32, 32, 16>,"
                 " true>, false, ck_tile::ComposedAttention<0u, true>, ck_tile::SimplifiedGeneric"
                 "AttentionMask<true>, ck_tile::TileFmhaTraits<true, true, false, false, "
                 "(ck_tile::BlockAttentionBiasEnum)0, false, true, false, false, -1> > >, "
                 "ck_tile::Default2DEpilogue<ck_tile::Default2DEpilogueProblem<float, "
                 "ck_tile::bf16_t, true, true> > > >(ck_tile::FmhaFwdKernel<...>::FmhaFwdGroupModeKargs)")
AMD_FLASH_BWD = ("void ck_tile::kentry<256, 1, ck_tile::FmhaBwdDQDKDVKernel<ck_tile::BlockFmhaBwd"
                 "DQDKDVPipelineKRKTRVRIGLP<ck_tile::BlockFmhaBwdPipelineProblem<ck_tile::bf16_t, "
                 "ck_tile::bf16_t, ck_tile::bf16_t, float, float, float, float, ck_tile::bf16_t, "
                 "unsigned short, ck_tile::bf16_t, ck_tile::bf16_t, float, ck_tile::bf16_t, "
                 "ck_tile::bf16_t, ck_tile::bf16_t, ck_tile::bf16_t> > > >(ck_tile::"
                 "FmhaBwdDQDKDVKernel<...>::FmhaBwdGroupModeKargs)")
AMD_FLASH_CVT = ("void ck_tile::kentry<256, 2, ck_tile::FmhaBwdConvertQGradKernel<ck_tile::"
                 "BlockFmhaBwdConvertQGrad<ck_tile::BlockFmhaBwdConvertQGradPipelineProblem<float,"
                 " ck_tile::bf16_t, 256, 64, 128, 128, true, false, ck_tile::TileFmhaBwdConvert"
                 "QGradTraits<true, true, 2> > > > >(ck_tile::FmhaBwdConvertQGradKernel<...>::"
                 "FmhaBwdConvertQGradGroupModeKargs)")
NCCL_AR = [
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
]

MEMCPY_HTOD = "Memcpy HtoD (Pageable -> Device)"
MEMCPY_DTOH = "Memcpy DtoH (Device -> Pageable)"
MEMSET = "Memset (Device)"


class Vendor:
    def __init__(self, kind):
        self.kind = kind
        amd = kind == "amd"
        self.compute_stream = 0 if amd else 7
        self.nccl_stream = 3 if amd else 21
        self.launch = "hipLaunchKernel" if amd else "cudaLaunchKernel"
        self.launch_gemm = "hipExtModuleLaunchKernel" if amd else "cudaLaunchKernelExC"
        self.launch_nccl = "hipExtLaunchKernel" if amd else "cudaLaunchKernelExC"
        self.memcpy = "hipMemcpyWithStream" if amd else "cudaMemcpyAsync"
        self.memset = "hipMemsetAsync" if amd else "cudaMemsetAsync"
        self.sync = "hipStreamSynchronize" if amd else "cudaStreamSynchronize"
        self.event_record = "hipEventRecord" if amd else "cudaEventRecord"
        self.stream_wait = "hipStreamWaitEvent" if amd else "cudaStreamWaitEvent"
        if kind == "nvidia":
            self.gemms = NV_GEMM
        elif amd:
            self.gemms = AMD_GEMM
        else:
            self.gemms = NV_GEMM + AMD_GEMM
        self.flash = [(AMD_FLASH_FWD, AMD_FLASH_BWD, AMD_FLASH_CVT)] if amd else \
            [(NV_FLASH_FWD, NV_FLASH_BWD, NV_FLASH_CVT)]
        if kind == "mixed":
            self.flash.append((AMD_FLASH_FWD, AMD_FLASH_BWD, AMD_FLASH_CVT))
        self.cbid = {self.launch: 211 if not amd else 0, self.launch_gemm: 430 if not amd else 0,
                     self.memcpy: 41 if not amd else 0, self.memset: 51 if not amd else 0,
                     self.sync: 131 if not amd else 0, self.event_record: 135 if not amd else 0,
                     self.stream_wait: 146 if not amd else 0}


# ------------------------------------------------------------------------ the program
# One launch site of the step: a stack of CPU ops (outermost first) and what it launches.
# launches: list of (runtime, gpu kind, name, stream role, mean duration us, grid, block,
#                    registers, shared memory, extra GPU args, bytes)


def fmt_dims(dims):
    return "[" + ", ".join("[" + ", ".join(str(d) for d in dim) + "]" for dim in dims) + "]"


def cpu_args_text(dims, types):
    n = len(dims)
    return ('"Concrete Inputs": [%s], "Input type": [%s], "Input Strides": %s, "Input Dims": %s'
            % (", ".join(['""'] * n), ", ".join('"%s"' % t for t in types),
               fmt_dims([strides(d) for d in dims]), fmt_dims(dims)))


def strides(dims):
    out = []
    acc = 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return list(reversed(out))


class Site:
    __slots__ = ("stack", "launches", "thread", "module", "pyfile", "cpu_us", "nccl", "mem")

    def __init__(self, stack, launches, thread=MAIN_TID, module=None, pyfile=None, cpu_us=12.0,
                 nccl=None):
        self.stack = stack        # [(name, cat, args text), ...]
        self.launches = launches  # [(runtime, kind, name, role, dur_us, grid, block, regs, smem, bytes)]
        self.thread = thread
        self.module = module      # python_function "nn.Module: X" frame name (or None)
        self.pyfile = pyfile      # python_function source frame name (or None)
        self.cpu_us = cpu_us      # host time of the innermost op around the launches
        self.nccl = nccl          # collective args text (or None)
        self.mem = None           # what it does to the allocator (set_memory)


def build_program(v, rng, layers, hidden, seq, batch, world):
    """The launch sites of one training step, in CPU order."""
    tokens = seq * batch
    ffn = 4 * hidden
    bf16 = "c10::BFloat16"
    sites = []

    def gemm(name_rng, m, n, k, dur):
        g = name_rng.choice(v.gemms)
        grid = [max(1, n // 256), max(1, m // 128), 1]
        return (v.launch_gemm if g.startswith(("sm90", "nvjet", "Cijk", "_ZN2ck")) else v.launch,
                "kernel", g, "compute", dur, grid, [384 if g.startswith("sm90") else 256, 1, 1],
                168, 213120 if g.startswith("sm90") else 65536, 0)

    def ew(name, n, dur):
        return (v.launch, "kernel", name, "compute", dur, [max(1, n // 512), 1, 1], [128, 1, 1],
                24, 0, 0)

    flash_fwd, flash_bwd, flash_cvt = v.flash[0]
    # the batch: dataloader, then copy to the device
    sites.append(Site(
        [("aten::to", "cpu_op", cpu_args_text([[batch, seq], [], [], [], [], []],
                                              ["long int", "Scalar", "Scalar", "", "", ""])),
         ("aten::_to_copy", "cpu_op", cpu_args_text([[batch, seq], [], []], ["long int", "", ""])),
         ("aten::copy_", "cpu_op", cpu_args_text([[batch, seq], [batch, seq], []],
                                                 ["long int", "long int", "Scalar"]))],
        [(v.memcpy, "gpu_memcpy", MEMCPY_HTOD, "compute", 22.0, None, None, 0, 0, tokens * 8)],
        cpu_us=35.0))
    sites.append(Site([("aten::embedding", "cpu_op",
                        cpu_args_text([[50304, hidden], [batch, seq], [], [], []],
                                      [bf16, "long int", "Scalar", "Scalar", "Scalar"])),
                       ("aten::index_select", "cpu_op",
                        cpu_args_text([[50304, hidden], [], [batch * seq]],
                                      [bf16, "Scalar", "long int"]))],
                      [(v.launch, "kernel",
                        "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::"
                        "BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo"
                        "<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16,"
                        " unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, int, "
                        "int, unsigned int, unsigned int, long)", "compute", 40.0,
                        [tokens, 1, 1], [128, 1, 1], 32, 0, 0)],
                      module="nn.Module: Embedding_0",
                      pyfile="torch/nn/modules/sparse.py(190): forward"))

    lin_dims = lambda m, n, k: cpu_args_text([[m, k], [n, k], [n]], [bf16, bf16, bf16])  # noqa
    mm_dims = lambda m, n, k: cpu_args_text([[n], [m, k], [k, n], [], []],  # noqa
                                            [bf16, bf16, bf16, "Scalar", "Scalar"])
    ln_dims = cpu_args_text([[batch, seq, hidden], [], [hidden], [hidden], []],
                            [bf16, "GenericList", bf16, bf16, "Scalar"])
    ew_dims = cpu_args_text([[batch, seq, hidden], [batch, seq, hidden], []],
                            [bf16, bf16, "Scalar"])
    for i in range(layers):
        name_rng = random.Random(rng.random())
        lyr = "layers.%d" % i

        def linear(mod, n, k, dur):
            return Site([("aten::linear", "cpu_op", lin_dims(tokens, n, k)),
                         ("aten::addmm", "cpu_op", mm_dims(tokens, n, k))],
                        [gemm(name_rng, tokens, n, k, dur)],
                        module="nn.Module: Linear_%s" % mod,
                        pyfile="torch/nn/modules/linear.py(125): forward", cpu_us=16.0)

        sites.append(Site([("aten::layer_norm", "cpu_op", ln_dims),
                           ("aten::native_layer_norm", "cpu_op", ln_dims)],
                          [ew(LN_FWD, tokens * hidden, 28.0)],
                          module="nn.Module: LayerNorm_%d" % (2 * i),
                          pyfile="torch/nn/modules/normalization.py(217): forward"))
        sites.append(linear("%s.attn.qkv" % lyr, 3 * hidden, hidden, 190.0))
        sites.append(Site([("aten::scaled_dot_product_attention", "cpu_op",
                            cpu_args_text([[batch, 32, seq, 128]] * 3 + [[], [], [], []],
                                          [bf16, bf16, bf16, "", "Scalar", "Scalar", ""])),
                           ("aten::_scaled_dot_product_flash_attention", "cpu_op",
                            cpu_args_text([[batch, 32, seq, 128]] * 3 + [[], [], []],
                                          [bf16, bf16, bf16, "Scalar", "Scalar", "Scalar"])),
                           ("aten::_flash_attention_forward", "cpu_op",
                            cpu_args_text([[batch, seq, 32, 128]] * 3 + [[], [], []],
                                          [bf16, bf16, bf16, "", "", "Scalar"]))],
                          [(v.launch, "kernel", flash_fwd, "compute", 360.0, [seq // 128, 32, batch],
                            [128, 1, 1], 255, 49152, 0)],
                          pyfile="torch/nn/functional.py(5382): scaled_dot_product_attention",
                          cpu_us=25.0))
        sites.append(linear("%s.attn.proj" % lyr, hidden, hidden, 70.0))
        sites.append(Site([("aten::add", "cpu_op", ew_dims)], [ew(EW_ADD, tokens * hidden, 21.0)]))
        sites.append(Site([("aten::layer_norm", "cpu_op", ln_dims),
                           ("aten::native_layer_norm", "cpu_op", ln_dims)],
                          [ew(LN_FWD, tokens * hidden, 28.0)],
                          module="nn.Module: LayerNorm_%d" % (2 * i + 1),
                          pyfile="torch/nn/modules/normalization.py(217): forward"))
        sites.append(linear("%s.mlp.fc1" % lyr, ffn, hidden, 290.0))
        sites.append(Site([("aten::gelu", "cpu_op", cpu_args_text([[batch, seq, ffn], []],
                                                                  [bf16, ""]))],
                          [ew(EW_GELU, tokens * ffn, 48.0)],
                          module="nn.Module: GELU_%d" % i,
                          pyfile="torch/nn/modules/activation.py(734): forward"))
        sites.append(linear("%s.mlp.fc2" % lyr, hidden, ffn, 285.0))
        sites.append(Site([("aten::add", "cpu_op", ew_dims)], [ew(EW_ADD, tokens * hidden, 21.0)]))
    # the loss
    sites.append(Site([("aten::cross_entropy_loss", "cpu_op",
                        cpu_args_text([[tokens, 50304], [tokens], [], [], [], []],
                                      [bf16, "long int", "", "Scalar", "Scalar", "Scalar"])),
                       ("aten::log_softmax", "cpu_op", ""), ("aten::_log_softmax", "cpu_op", "")],
                      [ew(SOFTMAX, tokens * 50304, 420.0)], cpu_us=20.0))
    sites.append(Site([("aten::nll_loss_nd", "cpu_op", ""), ("aten::nll_loss_forward", "cpu_op", "")],
                      [ew(NLL, tokens, 9.0)]))
    # backward on the autograd thread, layers in reverse, a DDP bucket per layer
    bwd = []
    bwd.append(Site([("autograd::engine::evaluate_function: LogSoftmaxBackward0", "cpu_op", ""),
                     ("LogSoftmaxBackward0", "cpu_op", ""),
                     ("aten::_log_softmax_backward_data", "cpu_op", "")],
                    [ew(SOFTMAX_BWD, tokens * 50304, 430.0)], thread=BWD_TID))
    for i in reversed(range(layers)):
        name_rng = random.Random(rng.random())

        def mm_bwd(n, k, dur):
            return Site([("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", ""),
                         ("AddmmBackward0", "cpu_op", ""),
                         ("aten::mm", "cpu_op", cpu_args_text([[tokens, n], [n, k]], [bf16, bf16]))],
                        [gemm(name_rng, tokens, k, n, dur), gemm(name_rng, n, k, tokens, dur)],
                        thread=BWD_TID, cpu_us=22.0)

        def acc(n):
            return Site([("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                          "cpu_op", ""),
                         ("torch::autograd::AccumulateGrad", "cpu_op", ""),
                         ("aten::add_", "cpu_op", cpu_args_text([[n], [n], []],
                                                                ["float", "float", "Scalar"]))],
                        [ew(EW_ACC, n, 6.0 + n / 2.0e6)], thread=BWD_TID)

        bwd.append(Site([("autograd::engine::evaluate_function: AddBackward0", "cpu_op", ""),
                         ("AddBackward0", "cpu_op", "")], [], thread=BWD_TID, cpu_us=4.0))
        bwd.append(mm_bwd(hidden, ffn, 285.0))
        bwd.append(acc(hidden * ffn))
        bwd.append(Site([("autograd::engine::evaluate_function: GeluBackward0", "cpu_op", ""),
                         ("GeluBackward0", "cpu_op", ""), ("aten::gelu_backward", "cpu_op", "")],
                        [ew(EW_GELU_BWD, tokens * ffn, 70.0)], thread=BWD_TID))
        bwd.append(mm_bwd(ffn, hidden, 290.0))
        bwd.append(acc(hidden * ffn))
        bwd.append(Site([("autograd::engine::evaluate_function: NativeLayerNormBackward0",
                          "cpu_op", ""), ("NativeLayerNormBackward0", "cpu_op", ""),
                         ("aten::native_layer_norm_backward", "cpu_op", ln_dims)],
                        [ew(LN_BWD_IN, tokens * hidden, 40.0), ew(LN_BWD_GB, hidden * 64, 31.0)],
                        thread=BWD_TID, cpu_us=18.0))
        bwd.append(mm_bwd(hidden, hidden, 70.0))
        bwd.append(acc(hidden * hidden))
        bwd.append(Site([("autograd::engine::evaluate_function: ScaledDotProductFlashAttention"
                          "Backward0", "cpu_op", ""),
                         ("ScaledDotProductFlashAttentionBackward0", "cpu_op", ""),
                         ("aten::_scaled_dot_product_flash_attention_backward", "cpu_op", ""),
                         ("aten::_flash_attention_backward", "cpu_op", "")],
                        [(v.memset, "gpu_memset", MEMSET, "compute", 3.5, None, None, 0, 0,
                          batch * seq * 32 * 128 * 4),
                         (v.launch, "kernel", flash_bwd, "compute", 900.0, [seq // 64, 32, batch],
                          [256, 1, 1], 255, 98304, 0),
                         (v.launch, "kernel", flash_cvt, "compute", 25.0, [seq // 64, 32, batch],
                          [256, 1, 1], 48, 0, 0)],
                        thread=BWD_TID, cpu_us=30.0))
        bwd.append(mm_bwd(3 * hidden, hidden, 190.0))
        bwd.append(acc(3 * hidden * hidden))
        bwd.append(Site([("autograd::engine::evaluate_function: NativeLayerNormBackward0",
                          "cpu_op", ""), ("NativeLayerNormBackward0", "cpu_op", ""),
                         ("aten::native_layer_norm_backward", "cpu_op", ln_dims)],
                        [ew(LN_BWD_IN, tokens * hidden, 40.0), ew(LN_BWD_GB, hidden * 64, 31.0)],
                        thread=BWD_TID, cpu_us=18.0))
        # one DDP bucket per layer (bucket_cap_mb=100: 12 h^2 bf16 gradients)
        bwd.append(nccl_site(v, name_rng, 12 * hidden * hidden, world))
    sites.extend(bwd)
    # clip_grad_norm_ and the fused Adam step
    # DDP's finalize: the compute stream waits for the last all-reduce (exposed communication)
    sites.append(Site([("aten::_foreach_norm", "cpu_op", "")],
                      [(v.stream_wait, "event", None, "wait_nccl", 0.0, None, None, 0, 0, 0),
                       ew(NORM, 1 << 20, 260.0), ew(NORM_CLEANUP, 1024, 4.0)],
                      pyfile="torch/nn/utils/clip_grad.py(41): _no_grad_wrapper", cpu_us=60.0))
    for _ in range(4):
        sites.append(Site([("Optimizer.step#AdamW.step", "user_annotation", ""),
                           ("aten::_fused_adamw_", "cpu_op", "")],
                          [ew(ADAM, 1 << 22, 310.0)],
                          pyfile="torch/optim/adamw.py(205): step", cpu_us=40.0))
    sites.append(Site([("aten::fill_", "cpu_op", "")], [ew(EW_FILL, 1 << 16, 3.0)]))
    # loss.item(): copy to the host and wait
    sites.append(Site([("aten::item", "cpu_op", cpu_args_text([[]], ["float"])),
                       ("aten::_local_scalar_dense", "cpu_op", cpu_args_text([[]], ["float"]))],
                      [(v.memcpy, "gpu_memcpy", MEMCPY_DTOH, "compute", 1.6, None, None, 0, 0, 4),
                       (v.sync, "sync", None, "compute", 0.0, None, None, 0, 0, 0)],
                      cpu_us=10.0))
    set_memory(sites, tokens, hidden, ffn)
    return sites


def set_memory(sites, tokens, hidden, ffn):
    """What each launch site does to the caching allocator (the [memory] events): a forward op
    allocates its output, saved for backward ("act"), some with a short-lived workspace
    ("tmp"); a backward op allocates the gradient of its input and frees the one before it and
    the activation it used ("bwd"); the optimizer and the gradient norm use temporaries; .item()
    allocates a few bytes on the host."""
    fwd = {"aten::copy_": tokens * 8, "aten::index_select": tokens * hidden * 2,
           "aten::_flash_attention_forward": tokens * hidden * 2 + tokens * 32 * 4,
           "aten::add": tokens * hidden * 2, "aten::gelu": tokens * ffn * 2,
           "aten::_log_softmax": tokens * 50304 * 4, "aten::nll_loss_forward": 512}
    for site in sites:
        outer, inner = site.stack[0][0], site.stack[-1][0]
        if site.thread == BWD_TID:
            if (outer.startswith("autograd::engine::evaluate_function:")
                    and "AccumulateGrad" not in outer and "AddBackward0" not in outer):
                site.mem = ("bwd", 0, 0)
        elif inner == "aten::native_layer_norm":
            site.mem = ("act", tokens * hidden * 2 + tokens * 8, tokens * 4)
        elif inner == "aten::addmm":
            n = int(re.search(r'"Input Dims": \[\[(\d+)\]', site.stack[-1][2]).group(1))
            site.mem = ("act", tokens * n * 2, 8 << 20)
        elif inner in fwd:
            site.mem = ("act", fwd[inner], 0)
        elif inner == "aten::_foreach_norm":
            site.mem = ("tmp", 0, 1 << 20)
        elif inner == "aten::_fused_adamw_":
            site.mem = ("tmp", 0, 4 << 20)
        elif inner == "aten::_local_scalar_dense":
            site.mem = ("host", 0, 4)


def nccl_site(v, rng, nparams, world):
    nelems = nparams
    name = NCCL_AR[0] if rng.random() < 0.7 else NCCL_AR[rng.randrange(1, len(NCCL_AR))]
    dtype = "Float" if "_f32_" in name else "BFloat16"
    size = nelems * (4 if dtype == "Float" else 2)
    # ring all-reduce on NVLink: 2 (w-1)/w of the message at ~180 GB/s of bus bandwidth
    mean = 12.0 + size * 2.0 * (world - 1) / world / 180e3
    coll = ('"Collective name": "allreduce", "In msg nelems": %d, "Out msg nelems": %d, '
            '"Group size": %d, "dtype": "%s", "In split size": "[]", "Out split size": "[]", '
            '"Process Group Name": "0", "Process Group Description": "default_pg", '
            '"Process Group Ranks": "[%s]"'
            % (nelems, nelems, world, dtype, ", ".join(str(r) for r in range(world))))
    return Site([("nccl:all_reduce", "user_annotation", ""),
                 ("record_param_comms", "cpu_op", coll)],
                [(v.event_record, "event", None, "compute", 0.0, None, None, 0, 0, 0),
                 (v.stream_wait, "event", None, "nccl", 0.0, None, None, 0, 0, 0),
                 (v.launch_nccl, "kernel", name, "nccl", mean, [24, 1, 1], [640, 1, 1], 96, 0, 0)],
                thread=BWD_TID, cpu_us=45.0, nccl=coll)


# ---------------------------------------------------------------------- the simulation
class State:
    __slots__ = ("cpu", "fwd_stream", "nccl_stream", "corr", "ext", "ev", "pyid", "seq", "mem")

    def __init__(self):
        self.cpu = T0_NS + 2_000_000
        self.fwd_stream = self.cpu
        self.nccl_stream = self.cpu
        self.corr = 1000
        self.ext = 1
        self.ev = 1
        self.pyid = 1
        self.seq = 0
        self.mem = []

    def copy(self):
        s = State()
        for k in State.__slots__:
            setattr(s, k, getattr(self, k))
        return s


class Alloc:
    """The caching allocator as the [memory] events see it: addresses reused by size (blocks
    rounded to 512 bytes), Total Allocated over a base that predates the trace (parameters,
    gradients, optimizer state), Total Reserved grown in 2 MiB segments with some slack."""

    def __init__(self, device_type):
        self.dev = device_type
        self.total = 21 << 30
        self.reserved = self.total + (1 << 30)
        self.host = 0
        self.next = 0x7F3A00000000
        self.free = {}
        self.ev = 10 ** 8

    def event(self, out, ts, nbytes, addr, tid, host=False):
        if host:
            self.host += nbytes
            total, reserved, dev, did = self.host, 0, 0, -1
        else:
            self.total += nbytes
            if self.total + (64 << 20) > self.reserved:
                self.reserved = ((self.total + (96 << 20)) >> 21) << 21
            total, reserved, dev, did = self.total, self.reserved, self.dev, 0
        self.ev += 1
        out.append((ts, '  {\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": '
                    '"[memory]",\n    "pid": %d, "tid": %d,\n    "ts": %s,\n    "args": {\n      '
                    '"Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Addr": %d, '
                    '"Device Id": %d, "Device Type": %d, "Ev Idx": %d\n    }\n  }'
                    % (PID, tid, us(ts), reserved, total, nbytes, addr, did, dev, self.ev)))

    def alloc(self, out, ts, nbytes, tid, host=False):
        size = max(512, (nbytes + 511) // 512 * 512)
        pool = self.free.get(size)
        if pool:
            addr = pool.pop()
        else:
            addr = self.next
            self.next += size
        self.event(out, ts, size, addr, tid, host)
        return (addr, size, host)

    def release(self, out, ts, block, tid):
        addr, size, host = block
        self.free.setdefault(size, []).append(addr)
        self.event(out, ts, -size, addr, tid, host)


def site_memory(site, b, e, tid, alloc, acts, grad, out):
    """The [memory] events of one site inside its innermost op [b, e); returns the gradient
    block the next backward op frees."""
    kind, nbytes, tmp = site.mem
    if kind == "act":
        t = alloc.alloc(out, b + 300, tmp, tid) if tmp else None
        acts.append(alloc.alloc(out, b + 600, nbytes, tid))
        if t:
            alloc.release(out, e - 400, t, tid)
    elif kind == "tmp":
        alloc.release(out, e - 400, alloc.alloc(out, b + 300, tmp, tid), tid)
    elif kind == "host":
        alloc.release(out, e - 400, alloc.alloc(out, b + 300, tmp, tid, host=True), tid)
    elif kind == "bwd":
        act = acts.pop() if acts else None
        new = alloc.alloc(out, b + 300, act[1] if act else 1 << 20, tid)
        if act:
            alloc.release(out, b + 500, act, tid)
        if grad:
            alloc.release(out, e - 300, grad, tid)
        grad = new
    return grad


def us(ns):
    return "%d.%03d" % divmod(ns, 1000)


def jit(rng, mean_us, sd=0.06):
    return max(1000, int(mean_us * 1000.0 * rng.lognormvariate(0.0, sd)))


def simulate(step, st, program, v, rng, want_cpu, want_gpu, alloc=None):
    """Runs one step from state st (updated in place). Returns (cpu events, gpu events), each a
    list of event texts (only those asked for are rendered), and counters. With an allocator
    (Alloc), also its [memory] events, in time order, in st.mem (no random draw: the other
    events are the same with and without)."""
    cpu_out = []
    gpu_out = []
    mem_out = []
    acts, grad = [], None
    nbwd = sum(1 for x in program if x.mem and x.mem[0] == "bwd")
    seen_bwd = 0
    n_ops = 0
    n_launch = 0
    cs = v.compute_stream
    step_start = st.cpu
    step_ext = st.ext
    st.ext += 1
    step_ev = st.ev
    st.ev += 1
    t = st.cpu + jit(rng, 30.0)
    # dataloader: usually short, sometimes a stall
    dl = jit(rng, 900.0, 0.3) if rng.random() > 0.03 else jit(rng, 25000.0, 0.5)
    if want_cpu:
        cpu_out.append(X("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter."
                         "__next__", PID, MAIN_TID, t, dl,
                         '"External id": %d,"Record function id": 0, "Ev Idx": %d'
                         % (st.ext, st.ev)))
    st.ext += 1
    st.ev += 1
    t += dl + jit(rng, 15.0)
    bwd_t = None
    gpu_first = None
    gpu_last = 0
    compute_free = max(st.fwd_stream, t)
    nccl_free = st.nccl_stream
    for site in program:
        if site.thread == BWD_TID:
            if bwd_t is None:
                # loss.backward(): the main thread blocks while the autograd thread runs
                bwd_t = t + jit(rng, 40.0)
                bwd_begin = t
            th_t = bwd_t
        else:
            if bwd_t is not None:
                if want_cpu:
                    cpu_out.append(X("python_function", "torch/_tensor.py(581): backward",
                                     PID, MAIN_TID, bwd_begin, bwd_t - bwd_begin + 5000,
                                     '"Python parent id": %d, "Python id": %d, "Ev Idx": %d'
                                     % (st.pyid - 1, st.pyid, st.ev)))
                st.pyid += 1
                st.ev += 1
                t = bwd_t + 8000
                bwd_t = None
            th_t = t
        depth = len(site.stack)
        pre = jit(rng, 3.0, 0.3)
        begin = th_t + pre
        inner = begin + depth * jit(rng, 2.5, 0.3)
        exts = list(range(st.ext, st.ext + depth))
        st.ext += depth
        lt = inner + jit(rng, site.cpu_us * 0.4, 0.2)
        launch_events = []
        for (rt, kind, name, role, dur_us, grid, block, regs, smem, nbytes) in site.launches:
            ldur = jit(rng, 4.5 if kind != "sync" else 2.0, 0.25)
            corr = st.corr
            st.corr += 1
            n_launch += 1
            if kind == "sync":
                # the host waits for the compute stream to drain
                ldur = max(ldur, compute_free - lt + 3000)
            if want_gpu:
                gpu_out.append(X("cuda_runtime", rt, PID, site.thread, lt, ldur,
                                 '"External id": %d, "cbid": %d, "correlation": %d'
                                 % (exts[-1], v.cbid.get(rt, 211), corr)))
            if kind in ("kernel", "gpu_memcpy", "gpu_memset"):
                n_ops += 1
                dur = jit(rng, dur_us, 0.04 if kind == "kernel" else 0.15)
                ready = lt + jit(rng, 6.0, 0.3)
                if role == "nccl":
                    start = max(ready, nccl_free, compute_free)
                    # rank skew: the collective waits for the slowest peer now and then
                    if rng.random() < 0.2:
                        start += jit(rng, 150.0, 0.6)
                    nccl_free = start + dur
                    stream = v.nccl_stream
                else:
                    start = max(ready, compute_free)
                    compute_free = start + dur
                    stream = cs
                if gpu_first is None:
                    gpu_first = start
                gpu_last = max(gpu_last, start + dur)
                if want_gpu:
                    gpu_out.append(flow("s", corr, PID, site.thread, lt))
                    if kind == "kernel":
                        bps = grid[0] * grid[1] * grid[2] / 132.0
                        args = ('"External id": %d,\n      "queued": 0, "device": 0, '
                                '"context": 1,\n      "stream": %d, "correlation": %d,\n      '
                                % (exts[-1], stream, corr))
                        if site.nccl:
                            args += site.nccl + ",\n      "
                        args += ('"registers per thread": %d,\n      "shared memory": %d,\n      '
                                 '"blocks per SM": %.6f,\n      "warps per SM": %.6f,\n      '
                                 '"grid": [%d, %d, %d],\n      "block": [%d, %d, %d],\n      '
                                 '"est. achieved occupancy %%": %d'
                                 % (regs, smem, bps, bps * block[0] / 32.0, grid[0], grid[1],
                                    grid[2], block[0], block[1], block[2],
                                    min(100, int(bps * 12.5))))
                    else:
                        args = ('"External id": %d,\n      "device": 0, "context": 1,\n      '
                                '"stream": %d, "correlation": %d,\n      "bytes": %d, '
                                '"memory bandwidth (GB/s)": %.6f'
                                % (exts[-1], stream, corr, nbytes, nbytes / float(dur)))
                    gpu_out.append(X(kind, name, 0, stream, start, dur, args))
                    gpu_out.append(flow("f", corr, 0, stream, start))
            elif kind == "event" and role == "nccl":
                # cudaStreamWaitEvent: the NCCL stream waits for the gradients
                nccl_free = max(nccl_free, compute_free)
            elif kind == "event" and role == "wait_nccl":
                compute_free = max(compute_free, nccl_free)
            lt += ldur + jit(rng, 2.0, 0.3)
        end_inner = max(lt, inner + jit(rng, site.cpu_us * 0.6, 0.2))
        end = end_inner + depth * jit(rng, 1.5, 0.3)
        if alloc is not None and site.mem:
            # inside the innermost op, as the CPU events below place it
            b_in, e_in = begin + (depth - 1) * 2500, end - (depth - 1) * 1500
            grad = site_memory(site, b_in, e_in, site.thread, alloc, acts, grad, mem_out)
            if site.mem[0] == "bwd":
                seen_bwd += 1
                if seen_bwd == nbwd:
                    # the end of backward: the graph's other activations and the last gradient go
                    while acts:
                        alloc.release(mem_out, e_in - 200, acts.pop(), site.thread)
                    if grad:
                        alloc.release(mem_out, e_in - 100, grad, site.thread)
                        grad = None
        if want_cpu:
            if site.pyfile:
                pb = begin - jit(rng, 4.0, 0.2)
                pe = end + jit(rng, 2.0, 0.2)
                if site.module:
                    cpu_out.append(X("python_function", site.module, PID, site.thread,
                                     pb - 3000, pe - pb + 5000,
                                     '"Python parent id": %d, "Python id": %d, '
                                     '"Python module id": %d, "Ev Idx": %d'
                                     % (st.pyid - 1, st.pyid, st.pyid % 97, st.ev)))
                    st.pyid += 1
                    st.ev += 1
                cpu_out.append(X("python_function", site.pyfile, PID, site.thread, pb, pe - pb,
                                 '"Python parent id": %d, "Python id": %d, "Ev Idx": %d'
                                 % (st.pyid - 1, st.pyid, st.ev)))
                st.pyid += 1
                st.ev += 1
            for d, (name, cat, argtext) in enumerate(site.stack):
                b = begin + d * 2500
                e = end - d * 1500
                args = '"External id": %d,"Record function id": 0, ' % exts[d]
                if site.thread == BWD_TID and name.startswith("autograd::"):
                    args += '"Sequence number": %d, "Fwd thread id": 1, ' % st.seq
                if argtext:
                    args += argtext + ", "
                args += '"Ev Idx": %d' % st.ev
                st.ev += 1
                cpu_out.append(X(cat, name, PID, site.thread, b, max(1000, e - b), args))
        else:
            st.ev += depth + (2 if site.module else 1 if site.pyfile else 0)
            if site.pyfile:
                st.pyid += 2 if site.module else 1
        st.seq += 1
        if site.thread == BWD_TID:
            bwd_t = end + jit(rng, 6.0, 0.4)
        else:
            t = end + jit(rng, 8.0, 0.4)
    step_end = t + jit(rng, 20.0)
    if want_cpu:
        cpu_out.insert(0, X("user_annotation", "ProfilerStep#%d" % step, PID, MAIN_TID,
                            step_start, step_end - step_start,
                            '"External id": %d,"Record function id": 0, "Ev Idx": %d'
                            % (step_ext, step_ev)))
    if want_gpu and gpu_first is not None:
        gpu_out.append(X("gpu_user_annotation", "ProfilerStep#%d" % step, 0, cs, gpu_first,
                         gpu_last - gpu_first, '"External id": %d' % step_ext))
    st.cpu = step_end
    st.fwd_stream = compute_free
    st.nccl_stream = nccl_free
    mem_out.sort(key=lambda e: e[0])
    st.mem = [text for _, text in mem_out]
    return cpu_out, gpu_out, n_ops, n_launch


def X(cat, name, pid, tid, ts, dur, args):
    return ('  {\n    "ph": "X", "cat": "%s", "name": "%s", "pid": %s, "tid": %s,\n'
            '    "ts": %s, "dur": %s,\n    "args": {\n      %s\n    }\n  }'
            % (cat, name, pid, tid, us(ts), us(dur), args))


def flow(ph, corr, pid, tid, ts):
    tail = ', "bp": "e"' if ph == "f" else ""
    return ('  {\n    "ph": "%s", "id": %d, "pid": %d, "tid": %d, "ts": %s,\n'
            '    "cat": "ac2g", "name": "ac2g"%s\n  }' % (ph, corr, pid, tid, us(ts), tail))


def header(v, rank, world):
    amd = v.kind == "amd"
    if amd:
        dev = ('      "id": %d, "name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992,\n'
               '      "computeMajor": 9, "computeMinor": 4,\n'
               '      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n'
               '      "regsPerBlock": 65536, "warpSize": 64,\n'
               '      "sharedMemPerBlock": 65536, "numSms": 304,\n'
               '      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 65536, '
               '"sharedMemPerMultiprocessor": 65536')
    else:
        dev = ('      "id": %d, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 84929216512,\n'
               '      "computeMajor": 9, "computeMinor": 0,\n'
               '      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n'
               '      "regsPerBlock": 65536, "warpSize": 32,\n'
               '      "sharedMemPerBlock": 49152, "numSms": 132,\n'
               '      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, '
               '"sharedMemPerMultiprocessor": 233472')
    devs = ",\n".join("    {\n" + (dev % i) + "\n    }" for i in range(min(world, 8)))
    ranks = ", ".join(str(r) for r in range(world))
    pg = (',\n    "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": '
          '"cuda:nccl", "pg_size": %d, "ranks": [%s]}]' % (world, ranks))
    return ('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n%s\n  ],\n'
            '  "%s": %d,\n  "distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d, '
            '"pg_count": 1%s, "nccl_version": "2.21.5"},\n'
            '  "record_shapes": 1,\n  "with_stack": 1,\n'
            '  "trace_id": "4E2C9D1B0A7F43C1B5D2E8F6A9C3B7D1",\n'
            '  "traceEvents": [\n'
            % (devs, "roctracer_version" if amd else "cuda_runtime_version",
               60200 if amd else 12040, rank, world, pg))


def footer(v, first_ns, last_ns):
    meta = []
    for pid, name, label in ((PID, "python3", None), (0, "python3", "GPU 0")):
        meta.append('  {\n    "name": "process_name", "ph": "M", "ts": %s, "pid": %d, "tid": 0,\n'
                    '    "args": {\n      "name": "%s"\n    }\n  }' % (us(first_ns), pid, name))
        if label:
            meta.append('  {\n    "name": "process_labels", "ph": "M", "ts": %s, "pid": %d, '
                        '"tid": 0,\n    "args": {\n      "labels": "%s"\n    }\n  }'
                        % (us(first_ns), pid, label))
        meta.append('  {\n    "name": "process_sort_index", "ph": "M", "ts": %s, "pid": %d, '
                    '"tid": 0,\n    "args": {\n      "sort_index": %d\n    }\n  }'
                    % (us(first_ns), pid, pid if pid < 8 else 5000000))
    for tid, name in ((MAIN_TID, "thread %d (python3)" % MAIN_TID),
                      (BWD_TID, "thread %d (pt_autograd_0)" % BWD_TID)):
        meta.append('  {\n    "name": "thread_name", "ph": "M", "ts": %s, "pid": %d, '
                    '"tid": %d,\n    "args": {\n      "name": "%s"\n    }\n  }'
                    % (us(first_ns), PID, tid, name))
    for stream in (v.compute_stream, v.nccl_stream):
        meta.append('  {\n    "name": "thread_name", "ph": "M", "ts": %s, "pid": 0, "tid": %d,\n'
                    '    "args": {\n      "name": "stream %d "\n    }\n  }'
                    % (us(first_ns), stream, stream))
    meta.append('  {\n    "ph": "X", "cat": "Trace", "ts": %s, "dur": %s,\n'
                '    "pid": "Spans", "tid": "PyTorch Profiler",\n'
                '    "name": "PyTorch Profiler (0)",\n    "args": {\n      "Op count": 0\n    }\n  }'
                % (us(first_ns), us(last_ns - first_ns)))
    meta.append('  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
                '    "pid": "", "tid": "", "ts": %s\n  }' % us(last_ns + 1000))
    tail = ('\n  ],\n  "traceName": "/workspace/traces/rank0.pt.trace.json",\n'
            '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1731408000000000000\n}\n')
    return meta, tail


class Sink:
    """Writes text to the plain and/or gzip outputs, counting uncompressed bytes."""

    def __init__(self, out, also_gzip):
        self.files = []
        if out.endswith(".gz"):
            self.files.append(gzip.open(out, "wb", compresslevel=9))
        else:
            self.files.append(open(out, "wb"))
            if also_gzip:
                self.files.append(gzip.open(out + ".gz", "wb", compresslevel=9))
        self.bytes = 0
        self.buf = []
        self.buffered = 0

    def write(self, text):
        self.buf.append(text)
        self.buffered += len(text)
        if self.buffered >= 1 << 22:
            self.flush()

    def flush(self):
        data = "".join(self.buf).encode("ascii")
        self.buf = []
        self.buffered = 0
        self.bytes += len(data)
        for f in self.files:
            f.write(data)

    def close(self):
        self.flush()
        for f in self.files:
            f.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=300.0, help="uncompressed size in MiB")
    ap.add_argument("--gzip", action="store_true", help="also write OUT.gz, same bytes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vendor", choices=("nvidia", "amd", "mixed"), default="mixed")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=8)
    ap.add_argument("--no-memory", action="store_true",
                    help="no [memory] events (a trace profiled without profile_memory)")
    a = ap.parse_args()
    v = Vendor(a.vendor)
    prog_rng = random.Random(a.seed)
    program = build_program(v, prog_rng, a.layers, 2048, 4096, 1, a.world_size)
    target = int(a.mb * 1024 * 1024)
    head = header(v, a.rank, a.world_size)

    def step_rng(step):
        return random.Random(a.seed * 1000003 + step)

    # size of a step (both parts), from two trial steps, fixes the number of steps
    probe = State()
    per_step = 0
    device_type = 6 if a.vendor == "amd" else 1
    for s in range(2):
        c, g, _, _ = simulate(s, probe, program, v, step_rng(s), True, True,
                              None if a.no_memory else Alloc(device_type))
        per_step += (sum(len(x) + 2 for x in c) + sum(len(x) + 2 for x in g)
                     + sum(len(x) + 2 for x in probe.mem))
    per_step /= 2.0
    nsteps = max(1, int(round((target - len(head) - 4000) / per_step)))

    sink = Sink(a.out, a.gzip)
    sink.write(head)
    events = 0
    ops = 0
    launches = 0
    starts = []
    st = State()
    first = st.cpu
    sep = ""
    # pass 1: the CPU side of every step
    for s in range(nsteps):
        starts.append(st.copy())
        c, _, _, _ = simulate(s, st, program, v, step_rng(s), True, False)
        sink.write(sep + ",\n".join(c))
        sep = ",\n"
        events += len(c)
    last = max(st.cpu, st.fwd_stream, st.nccl_stream)
    # then the allocator's [memory] events of every step, in time order (Kineto writes its
    # instant events after the CPU ops), regenerated from the same seeds
    if not a.no_memory:
        alloc = Alloc(device_type)
        for s in range(nsteps):
            m = starts[s].copy()
            # the CPU side rendered again (and dropped): its random draws place the ops
            simulate(s, m, program, v, step_rng(s), True, False, alloc)
            if m.mem:
                sink.write(sep + ",\n".join(m.mem))
                sep = ",\n"
            events += len(m.mem)
    # pass 2: the CUPTI side (runtime calls, GPU ops, flows), regenerated from the same seeds
    for s in range(nsteps):
        st = starts[s]
        _, g, n_ops, n_launch = simulate(s, st, program, v, step_rng(s), False, True)
        if g:
            sink.write(sep + ",\n".join(g))
        events += len(g)
        ops += n_ops
        launches += n_launch
    meta, tail = footer(v, first, last)
    sink.write(sep + ",\n".join(meta) + tail)
    events += len(meta)
    sink.close()
    sys.stdout.write("%d %d %d %d %d\n" % (sink.bytes, events, ops, launches, nsteps))
    sys.stderr.write("gentrace: %s: %d bytes (%.1f MiB), %d events, %d GPU ops, %d launches, "
                     "%d steps, vendor %s, seed %d\n"
                     % (a.out, sink.bytes, sink.bytes / 1048576.0, events, ops, launches, nsteps,
                        a.vendor, a.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
