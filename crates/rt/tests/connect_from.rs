//! `TcpStream::connect_from`: the connection leaves from the local
//! address asked for (a loopback alias here), on both backends.

use ringkit::net::{TcpListener, TcpStream};

ringkit::test_all! {
    async fn a_connection_leaves_from_the_address_asked_for() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let from: std::net::SocketAddr = "127.0.0.7:0".parse().unwrap();
        let accept = ringkit::spawn(async move { l.accept().await.unwrap().1 });
        let s = TcpStream::connect_from(from, to).await.unwrap();
        let seen = accept.await.unwrap();
        assert_eq!(seen.ip(), from.ip());
        assert_eq!(s.local_addr().unwrap().ip(), from.ip());
        // An address this host does not have is refused before any SYN.
        let e = TcpStream::connect_from("192.0.2.1:0".parse().unwrap(), to)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrNotAvailable, "{e}");
    }
}
