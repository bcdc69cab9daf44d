use ringkit::net::{TcpListener, TcpStream};

ringkit::test_all! {
    async fn echo_once() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = ringkit::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let (res, buf) = s.read(Vec::with_capacity(64)).await;
            res.unwrap();
            s.write_all(buf).await.0.unwrap();
        });
        let c = TcpStream::connect(addr).await.unwrap();
        c.write_all(&b"ping"[..]).await.0.unwrap();
        let (n, buf) = c.read(Vec::with_capacity(64)).await;
        assert_eq!(&buf[..n.unwrap()], b"ping");
        server.await.unwrap();
        eprintln!("{}", ringkit::metrics());
    }
}
