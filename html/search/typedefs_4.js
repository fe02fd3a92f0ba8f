var searchData=
[
  ['impl_0',['Impl',['../classpolicytrain_1_1memory_1_1Recomputed.html#aeea00e0fe31a94d27439d46d0d221828',1,'policytrain::memory::Recomputed']]]
];
